package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// A resync copies one table afresh while ferry runs. `ferry resync` asks
// for it with a logical decoding message in PostgreSQL's WAL, so the
// running ferry meets the request in stream order, and a ferry that is
// stopped meets it when it starts: the slot is not confirmed past the
// message until the table is copied, so a crash in the middle makes the
// restarted ferry copy it again. The copy is a rebuild (see rebuild): a
// new snapshot into a shadow table, swapped in, after which the stream's
// changes that the snapshot does not hold are applied.

const resyncPrefix = "ferry.resync"

// resyncRequest is the message's content.
type resyncRequest struct {
	Tables []resyncTable `json:"tables"`
	At     time.Time     `json:"at"`
	// Stale: ferry's own request, written after a copy that found the
	// table changed since the stream's point (see recheckStale): the table
	// is rebuilt only if it is still stale from a copy before the message.
	Stale bool `json:"stale,omitempty"`
	// Rejoined: ferry's own request for tables that were dropped from the
	// publication and added back (see membership.go): a destination that
	// cannot rebuild them stops ferry.
	Rejoined bool `json:"rejoined,omitempty"`
}

type resyncTable struct {
	OID  uint32 `json:"oid"`
	Name string `json:"name"` // schema.name when asked, for messages
}

// Resync is a request ferry resync made.
type Resync struct {
	Tables []string      // schema.name
	LSN    pglogrepl.LSN // the request's WAL position: the copy is done once the slot is confirmed past it
	Active bool          // a ferry run was streaming from the slot when asked
}

// RequestResync asks the ferry run of cfg's slot to copy tables afresh.
// Each must be one that ferry replicates: in the publication (or its
// append-only twin).
func RequestResync(ctx context.Context, cfg Config, tables []string) (Resync, error) {
	cfg = cfg.withDefaults()
	if len(tables) == 0 {
		return Resync{}, errors.New("resync: name the tables to copy again (schema.table ...)")
	}
	conn, err := connect(ctx, cfg.ConnString)
	if err != nil {
		return Resync{}, err
	}
	defer conn.Close(context.Background())
	var active bool
	if err := conn.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, cfg.Slot).Scan(&active); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Resync{}, fmt.Errorf("resync: replication slot %s does not exist: ferry run has not started with --slot %s (its first start copies every table anyway)", cfg.Slot, cfg.Slot)
		}
		return Resync{}, fmt.Errorf("resync: read slot %s: %w", cfg.Slot, err)
	}
	req := resyncRequest{At: time.Now().UTC()}
	out := Resync{Active: active}
	for _, t := range tables {
		sch, name, err := ParseTableName(t)
		if err != nil {
			return Resync{}, fmt.Errorf("resync: %w", err)
		}
		var oid uint32
		var published bool
		err = conn.QueryRow(ctx, `SELECT c.oid, EXISTS (SELECT 1 FROM pg_publication_tables p
				WHERE p.pubname IN ($3::text, $3::text || '_append') AND p.schemaname = n.nspname AND p.tablename = c.relname)
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
			sch, name, cfg.Publication).Scan(&oid, &published)
		ref := tableRef{Schema: sch, Name: name}
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return Resync{}, fmt.Errorf("resync: table %s does not exist in PostgreSQL", ref)
		case err != nil:
			return Resync{}, fmt.Errorf("resync: look up table %s: %w", ref, err)
		case !published:
			return Resync{}, fmt.Errorf("resync: table %s is not in publication %s (nor %s_append), so ferry does not replicate it: "+
				"add it (ALTER PUBLICATION %s ADD TABLE %s), and ferry copies it when it joins", ref, cfg.Publication, cfg.Publication, cfg.Publication, ref.quoted())
		}
		req.Tables = append(req.Tables, resyncTable{OID: oid, Name: ref.String()})
		out.Tables = append(out.Tables, ref.String())
	}
	doc, err := json.Marshal(req)
	if err != nil {
		return Resync{}, err
	}
	// Transactional: the request reaches the stream with its commit.
	if err := conn.QueryRow(ctx, `SELECT pg_logical_emit_message(true, $1, $2)::text`, resyncPrefix, string(doc)).Scan(lsnScanner{&out.LSN}); err != nil {
		return Resync{}, fmt.Errorf("resync: write the request into the WAL: %w", err)
	}
	return out, nil
}

// WaitResync waits until the slot is confirmed past the request: every
// table it named is copied and swapped in. It fails when no ferry streams
// from the slot for longer than a minute, or when ctx ends.
func WaitResync(ctx context.Context, cfg Config, r Resync, progress func(confirmed pglogrepl.LSN)) error {
	cfg = cfg.withDefaults()
	conn, err := connect(ctx, cfg.ConnString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	idleSince := time.Time{}
	for {
		var active bool
		var confirmed pglogrepl.LSN
		err := conn.QueryRow(ctx, `SELECT active, coalesce(confirmed_flush_lsn, '0/0')::text FROM pg_replication_slots WHERE slot_name = $1`, cfg.Slot).
			Scan(&active, lsnScanner{&confirmed})
		if err != nil {
			return fmt.Errorf("resync: read slot %s: %w", cfg.Slot, err)
		}
		if confirmed > r.LSN {
			return nil
		}
		if progress != nil {
			progress(confirmed)
		}
		switch {
		case active:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		case time.Since(idleSince) > time.Minute:
			return fmt.Errorf("resync: no ferry run has streamed from slot %s for a minute: the request (WAL %s) waits in the slot, and ferry copies %v when it starts",
				cfg.Slot, r.LSN, r.Tables)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// resync handles a resync request met in the stream: each table it names
// that ferry replicates is rebuilt from a fresh copy.
func (s *stream) resync(ctx context.Context, req resyncRequest, version uint64) error {
	for _, t := range req.Tables {
		// A copy of the table beside the stream, from an earlier request,
		// ends first: this one's copy follows it.
		if err := s.settleResync(ctx, t.OID); err != nil {
			return err
		}
		rel := s.byOID[t.OID]
		if rel == nil {
			s.log.Warn("resync asked for a table ferry does not replicate (any more): nothing to copy", zap.String("table", t.Name))
			continue
		}
		if req.Stale && (!rel.stale || rel.copied == nil || rel.copied.End > version) {
			continue // brought up to date by the stream since, or stale from a later copy, whose own request follows
		}
		conn, err := s.pg(ctx)
		if err != nil {
			return err
		}
		d, err := describeTable(ctx, conn, rel.ref)
		if errors.Is(err, pgx.ErrNoRows) {
			s.log.Warn("resync asked for a table dropped since: nothing to copy", zap.Stringer("table", rel.ref))
			continue
		}
		if err != nil {
			return err
		}
		if !req.Stale {
			// The copy reads the catalog as it is now, which may be ahead of
			// the stream: a column added after the request, whose rows the
			// stream has yet to bring, may come without a new Relation message
			// (pgoutput sent the table's shape before). The table is rebuilt in
			// the shape the stream knows; a copy that meets a newer one marks
			// the table stale, and the change rebuilds it again when the stream
			// reaches it. Only a Stale request, which the stream meets after
			// every change before it, takes the catalog's shape.
			d = rel.doc.described(rel.ref.AppendOnly)
		}
		if c, ok := s.sink.(interface {
			CanRebuild(*schema.TableMap) error
		}); ok {
			if err := c.CanRebuild(rel.tm); err != nil {
				if req.Stale {
					return fmt.Errorf("table %s holds empty values in ClickHouse for columns changed in PostgreSQL without a row change since, "+
						"and only a rebuild can fill them, which the destination refuses (%v): run ferry setup so that DDL capture brings schema changes in stream order, "+
						"then drop the ClickHouse table %s and start ferry again to copy it", rel.ref, err, rel.tm.Name)
				}
				if req.Rejoined {
					return fmt.Errorf("table %s was dropped from publication %s and added back, so ClickHouse lacks the changes made while it was out, "+
						"and only a copy can bring them, which the destination refuses (%v): drop the ClickHouse table %s and start ferry again to copy it",
						rel.ref, s.cfg.Publication, err, rel.tm.Name)
				}
				// Not a reason to stop the stream: the table stays as it is.
				s.log.Error("resync refused: the table stays as it is", zap.Stringer("table", rel.ref), zap.Error(err))
				continue
			}
		}
		if req.Stale {
			s.log.Warn("the table's columns changed in PostgreSQL after the point the stream was at when it was copied, and no row change since "+
				"has brought the new shape (DDL capture is not installed): rebuilding it as the catalog describes it", zap.Stringer("table", rel.ref))
		} else {
			s.log.Info("resync: copying the table afresh into a shadow table, to swap it in", zap.Stringer("table", rel.ref),
				zap.String("clickhouse_table", rel.tm.Name), zap.Time("asked_at", req.At))
		}
		s.observe(rel, "resync")
		if !req.Stale && !req.Rejoined {
			live, err := s.resyncLive(ctx, rel, d, version)
			if err != nil {
				return err
			}
			if live {
				continue
			}
		}
		start := time.Now()
		rel.joining = rel.joining || req.Rejoined
		if err := s.evolveTo(ctx, rel, d, true, version, true); err != nil {
			return fmt.Errorf("resync %s: %w", rel.ref, err)
		}
		s.log.Info("resync done", zap.Stringer("table", rel.ref), zap.Duration("took", time.Since(start)))
		if req.Rejoined {
			if err := s.recopied(ctx, t.OID, recopyName(req)); err != nil {
				return err
			}
		}
	}
	return nil
}

// recheckStale writes, after a copy that left rel stale, ferry's own
// resync request for it into the WAL. A stale copy read columns that the
// stream does not describe yet: a change committed before the copy's
// snapshot, which the stream brings with the table's next row change (a
// Relation message) or, with DDL capture, as a ferry.ddl message. Without
// DDL capture a change that no row change follows (ALTER COLUMN TYPE, ADD
// COLUMN on an idle table) would never reach the stream, and the copied
// rows would keep empty values for ever while the slot is confirmed past
// it. When the stream meets the request, every change before the copy has
// been met; if the table is still stale, it is rebuilt from the catalog.
// A catch-up run streams at least to the request.
func (r *Replicator) recheckStale(ctx context.Context, conn *pgx.Conn, rel *relation) error {
	doc, err := json.Marshal(resyncRequest{Tables: []resyncTable{{OID: rel.ref.OID, Name: rel.ref.String()}}, At: time.Now().UTC(), Stale: true})
	if err != nil {
		return err
	}
	var at pglogrepl.LSN
	if err := conn.QueryRow(ctx, `SELECT pg_logical_emit_message(true, $1, $2)::text`, resyncPrefix, string(doc)).Scan(lsnScanner{&at}); err != nil {
		return fmt.Errorf("copy of %s: write the request to check the table's shape again into the WAL: %w", rel.ref, err)
	}
	r.recheckTo = max(r.recheckTo, at)
	return nil
}
