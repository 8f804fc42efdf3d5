package replicator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// prepare makes every table's ClickHouse side ready and returns the tables
// whose rows are not there: missing tables (created now), tables whose
// columns are not the mapping's (replaced by empty ones; the schema
// changed while ferry was stopped, or a rebuild was cut short) and tables
// whose copy at an earlier restart was cut short (replaced too).
//
// On a resume (stored is not nil) each such table's state says it is being
// copied before its ClickHouse side is made anew: an empty table made here
// looks, to the next attempt, like one that holds its rows, so a start that
// fails before copyMissing (the slot still held by ferry's old walsender,
// a lost connection, a kill) must leave the copy still to make.
func (r *Replicator) prepare(ctx context.Context, rels []*relation, stored map[uint32]catalogTable) ([]*relation, error) {
	var empty []*relation
	if ev, ok := r.sink.(interface {
		Matches(ctx context.Context, tm *schema.TableMap) (bool, bool, error)
		Replace(ctx context.Context, tm *schema.TableMap) error
	}); ok {
		var replace []*relation
		for _, rel := range rels {
			exists, matches, err := ev.Matches(ctx, rel.tm)
			if err != nil {
				return nil, err
			}
			switch {
			case !exists:
				empty = append(empty, rel)
			case rel.doc.Copying:
				r.log.Warn("the last copy of this table was cut short: replacing the partial ClickHouse table with a fresh copy",
					zap.Stringer("table", rel.ref), zap.String("clickhouse_table", rel.tm.Name))
				replace = append(replace, rel)
			case !matches:
				r.log.Warn("the ClickHouse table's columns are not the table's: replacing it with a fresh copy",
					zap.Stringer("table", rel.ref), zap.String("clickhouse_table", rel.tm.Name))
				replace = append(replace, rel)
			}
		}
		empty = append(empty, replace...)
		if stored != nil {
			for _, rel := range empty {
				rel.doc.Copying = true
				if err := r.saveState(ctx, rel); err != nil {
					return nil, err
				}
			}
		}
		for _, rel := range replace {
			if err := ev.Replace(ctx, rel.tm); err != nil {
				return nil, err
			}
		}
	}
	tms := make([]*schema.TableMap, len(rels))
	for i, rel := range rels {
		tms[i] = rel.tm
	}
	return empty, r.sink.Prepare(ctx, tms)
}

// unstored returns, on a resume, the tables the slot keeps no state of:
// they joined the publication while ferry was stopped (or before the
// stream reached them), or ferry stopped in the middle of the copy that
// joined them, or after the initial copy and before it stored their
// states. Neither the stream nor a destination table that exists tells
// that such a table was ever copied whole (the Kafka sink reports every
// table present), so each is copied again; the copy empties the
// destination table first, as every copy does.
func (r *Replicator) unstored(rels []*relation, stored map[uint32]catalogTable, empty []*relation) []*relation {
	if _, ok := r.sink.(loader.TableStateStore); !ok || stored == nil {
		return nil
	}
	var out []*relation
	for _, rel := range rels {
		if _, ok := stored[rel.ref.OID]; ok || slices.Contains(empty, rel) {
			continue
		}
		r.log.Info("the slot has no state of this table (it joined the publication while ferry was stopped, or its copy was cut short): copying it",
			zap.Stringer("table", rel.ref), zap.String("clickhouse_table", rel.tm.Name))
		rel.joining = true
		out = append(out, rel)
	}
	return out
}

// copyMissing copies, on a restart, the tables prepare found without rows,
// as copyFresh does, and stores each one's state with its copyCut: the
// stream replayed from the resume position leaves out what the copy holds.
func (r *Replicator) copyMissing(ctx context.Context, conn *pgx.Conn, rels []*relation) error {
	for _, rel := range rels {
		r.log.Info("copying a table whose rows ClickHouse lacks", zap.Stringer("table", rel.ref))
		if err := refreshLeaves(ctx, conn, rel); err != nil {
			return err
		}
		rel.keyNullsApart()
		rel.member = nil // the copy holds every change so far: no gap before it counts
		rel.doc.Copying = true
		if err := r.saveState(ctx, rel); err != nil {
			return err
		}
		if err := r.copyFresh(ctx, rel, rel.tm); err != nil {
			return fmt.Errorf("copy %s: %w", rel.ref, err)
		}
		rel.doc.Copying = false
		if err := r.saveState(ctx, rel); err != nil {
			return err
		}
	}
	return nil
}

// union lists the relations of a and b, each once.
func union(a, b []*relation) []*relation {
	seen := map[*relation]bool{}
	var out []*relation
	for _, r := range append(append([]*relation{}, a...), b...) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

func newRelation(ref tableRef, tm *schema.TableMap, d described) *relation {
	return &relation{ref: ref, tm: tm, typeOIDs: d.typeOIDs, attnums: d.attnums, hasDefault: d.hasDefault, partitions: d.partitions, doc: d.doc,
		copied: d.doc.Copied, stale: d.doc.Stale, truncated: pglogrepl.LSN(d.doc.Truncated), shapedAt: d.doc.ShapedAt, member: d.doc.Member,
		recopy: d.doc.Recopy}
}

// saveState stores the description the table's ClickHouse side now
// matches, where the sink keeps such states.
func (r *Replicator) saveState(ctx context.Context, rel *relation) error {
	store, ok := r.sink.(loader.TableStateStore)
	if !ok {
		return nil
	}
	d := rel.doc
	d.Copied, d.Stale, d.Truncated, d.ShapedAt, d.Member, d.Recopy = rel.copied, rel.stale, uint64(rel.truncated), rel.shapedAt, rel.member, rel.recopy
	doc, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode the description of %s: %w", rel.ref, err)
	}
	return store.SetTableState(ctx, r.cfg.Slot, rel.ref.OID, doc)
}

// storedStates reads the descriptions saved for the slot's tables.
func (r *Replicator) storedStates(ctx context.Context) (map[uint32]catalogTable, error) {
	store, ok := r.sink.(loader.TableStateStore)
	if !ok {
		return nil, nil
	}
	raw, err := store.TableStates(ctx, r.cfg.Slot)
	if err != nil {
		return nil, err
	}
	docs := make(map[uint32]catalogTable, len(raw))
	for oid, b := range raw {
		var doc catalogTable
		if err := json.Unmarshal(b, &doc); err != nil {
			r.log.Warn("ignoring a stored table description ferry cannot read", zap.Uint32("oid", oid), zap.Error(err))
			continue
		}
		docs[oid] = doc
	}
	return docs, nil
}

// resumeStates returns the stored table descriptions when this start
// resumes a slot whose initial copy finished, and nil on a first start,
// which describes every table afresh.
func (r *Replicator) resumeStates(ctx context.Context, conn *pgx.Conn) (map[uint32]catalogTable, error) {
	slot, err := readSlot(ctx, conn, r.cfg.Slot)
	if err != nil || !slot.exists {
		return nil, err
	}
	state, err := r.store.SnapshotState(ctx, r.cfg.Slot)
	if err != nil || !state.Done {
		return nil, err
	}
	return r.storedStates(ctx)
}
