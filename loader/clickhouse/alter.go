package clickhouse

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

var _ loader.Evolver = (*Sink)(nil)

// AlterTable applies in-place column changes, one ALTER statement each
// (ClickHouse takes one statement per call).
func (s *Sink) AlterTable(ctx context.Context, tm *schema.TableMap, changes []schema.ColumnChange) error {
	for _, c := range changes {
		qs := []string{tm.AlterSQL(s.db, c)}
		if s.cluster != "" {
			qs = tm.ClusterAlterSQL(s.db, s.cluster, c)
		}
		for _, q := range qs {
			if err := s.exec(ctx, q, "alter table "+s.table(tm.Name)); err != nil {
				return reject(err)
			}
			s.log.Info("altered table", zap.String("table", tm.Name), zap.String("statement", q))
		}
	}
	if len(changes) == 0 {
		return nil
	}
	return s.syncView(ctx, tm)
}

// errClusterRebuild refuses the table renames and rebuilds that a cluster
// does not support yet (the Distributed table names its local table).
func (s *Sink) errClusterRebuild(what string, tm *schema.TableMap) error {
	return reject(fmt.Errorf("clickhouse: %s %s on cluster %s is not supported yet: "+
		"drop %s and %s ON CLUSTER and restart ferry to copy the table anew",
		what, s.table(tm.Name), s.cluster, s.table(tm.Name), s.table(schema.LocalName(tm.Name))))
}

// CanRebuild tells whether the sink can rebuild a table (a resync): not
// on a cluster yet.
func (s *Sink) CanRebuild(tm *schema.TableMap) error {
	if s.cluster != "" {
		return s.errClusterRebuild("rebuild table", tm)
	}
	return nil
}

// RenameTable renames a table within the sink's database.
func (s *Sink) RenameTable(ctx context.Context, from, to *schema.TableMap) error {
	if from.Name == to.Name {
		return nil
	}
	if s.cluster != "" {
		return s.errClusterRebuild("rename table", from)
	}
	if err := s.setAside(ctx, from, to); err != nil {
		return err
	}
	q := schema.RenameTableSQL(s.db, [2]string{from.Name, to.Name})
	if err := s.exec(ctx, q, fmt.Sprintf("rename table %s to %s", s.table(from.Name), s.table(to.Name))); err != nil {
		return reject(err)
	}
	if err := s.dropView(ctx, from.Name); err != nil {
		return err
	}
	// The table has from's columns until the AlterTable that follows.
	renamed := *from
	renamed.Name = to.Name
	return s.syncView(ctx, &renamed)
}

// setAside handles a rename whose target exists, as one received again
// after ferry stopped between the RENAME and the state that records it:
// the next start copied the table afresh under its old name, and the
// table of the new name is the first try's, which the stream no longer
// writes. It may as well be the rows ferry kept of a table dropped in
// PostgreSQL. Either way it is renamed aside, to a name of its own that
// the warning gives, rather than dropped, and the rename goes ahead. A
// table of that name that is not one of ferry's is left alone: the rename
// fails, naming it.
func (s *Sink) setAside(ctx context.Context, from, to *schema.TableMap) error {
	have, err := s.columns(ctx, to.Name)
	if err != nil || len(have) == 0 {
		return err
	}
	if _, ok := have[schema.VersionColumn]; !ok {
		return fmt.Errorf("clickhouse: rename table %s to %s: a table of that name exists and is not one ferry made (it has no %s column): rename or drop it, then start ferry again",
			s.table(from.Name), s.table(to.Name), schema.VersionColumn)
	}
	aside := to.Name + "__ferry_aside_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s.log.Warn("renaming a table to a name ClickHouse already has: the table of that name is kept under another (left from before a restart, or kept from a table dropped in PostgreSQL); drop it once you do not need it",
		zap.String("from", from.Name), zap.String("to", to.Name), zap.String("kept_as", aside))
	if err := s.dropView(ctx, to.Name); err != nil {
		return err
	}
	return s.exec(ctx, schema.RenameTableSQL(s.db, [2]string{to.Name, aside}), fmt.Sprintf("rename table %s to %s", s.table(to.Name), s.table(aside)))
}

// RebuildsLive: the stream may write to a shadow table while a copy fills
// it (loader.LiveRebuilder); a cluster does not rebuild at all.
func (s *Sink) RebuildsLive() bool { return s.cluster == "" }

// SwapTable puts shadow in target's place and drops the old table. In an
// Atomic database (the default from ClickHouse 20.10) one EXCHANGE TABLES
// does it, so a reader never finds the table missing; elsewhere one RENAME
// TABLE of both, which a reader may see half done.
func (s *Sink) SwapTable(ctx context.Context, target, shadow *schema.TableMap) error {
	if s.cluster != "" {
		return s.errClusterRebuild("rebuild table", target)
	}
	if err := s.dropOldTables(ctx, target.Name); err != nil {
		return err
	}
	// A name of its own for each swap: a server killed while it dropped
	// an old table (18.16, an Ordinary database) may leave its data
	// directory behind with no table, and a RENAME to that name then fails
	// for ever ("target path already exists").
	old := oldTablePrefix(target.Name) + strconv.FormatInt(time.Now().UnixNano(), 36)
	exists, err := s.Exists(ctx, target)
	if err != nil {
		return err
	}
	if exists {
		atomic, err := s.atomicDatabase(ctx)
		if err != nil {
			return err
		}
		if atomic {
			if err := s.exec(ctx, schema.ExchangeTablesSQL(s.db, shadow.Name, target.Name), "swap in the rebuilt "+s.table(target.Name)); err != nil {
				return reject(err)
			}
			// The shadow's name now holds the old rows.
			if err := s.exec(ctx, "DROP TABLE IF EXISTS "+s.table(shadow.Name), "drop the replaced "+s.table(target.Name)); err != nil {
				return err
			}
			return s.syncView(ctx, swappedIn(target, shadow))
		}
	}
	pairs := [][2]string{{shadow.Name, target.Name}}
	if exists {
		pairs = [][2]string{{target.Name, old}, {shadow.Name, target.Name}}
	}
	if err := s.exec(ctx, schema.RenameTableSQL(s.db, pairs...), "swap in the rebuilt "+s.table(target.Name)); err != nil {
		return reject(err)
	}
	if exists {
		if err := s.exec(ctx, "DROP TABLE IF EXISTS "+s.table(old), "drop table "+s.table(old)); err != nil {
			return err
		}
	}
	return s.syncView(ctx, swappedIn(target, shadow))
}

// oldTablePrefix begins the name a swap gives the table it replaces, until
// it drops it.
func oldTablePrefix(table string) string { return table + "__ferry_old" }

// dropOldTables drops the replaced tables that earlier swaps of table did
// not drop (the process or the server ended in between).
func (s *Sink) dropOldTables(ctx context.Context, table string) error {
	q := "SELECT name FROM system.tables WHERE database = " + schema.QuoteCHString(s.db) +
		" AND startsWith(name, " + schema.QuoteCHString(oldTablePrefix(table)) + ")"
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return s.red.wrap(err, "clickhouse: list the tables earlier rebuilds of %s left", s.table(table))
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return s.red.wrap(err, "clickhouse: list the tables earlier rebuilds of %s left", s.table(table))
		}
		names = append(names, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.red.wrap(err, "clickhouse: list the tables earlier rebuilds of %s left", s.table(table))
	}
	for _, name := range names {
		if err := s.exec(ctx, "DROP TABLE IF EXISTS "+s.table(name), "drop table "+s.table(name)+", which an earlier rebuild left"); err != nil {
			return err
		}
	}
	return nil
}

// swappedIn is the mapping of target's table once shadow took its place.
func swappedIn(target, shadow *schema.TableMap) *schema.TableMap {
	tm := *shadow
	tm.Name = target.Name
	return &tm
}

// Exists reports whether the table is in the sink's database.
func (s *Sink) Exists(ctx context.Context, tm *schema.TableMap) (bool, error) {
	cols, err := s.columns(ctx, tm.Name)
	if err != nil {
		return false, err
	}
	return len(cols) > 0, nil
}

// Matches reports whether the table exists and whether its columns are
// the mapping's.
func (s *Sink) Matches(ctx context.Context, tm *schema.TableMap) (exists, matches bool, err error) {
	have, err := s.columns(ctx, tm.Name)
	if err != nil || len(have) == 0 {
		return false, false, err
	}
	return true, checkColumns(s.db, tm, have) == nil, nil
}

// Replace puts an empty table of the mapping in place of the existing one.
func (s *Sink) Replace(ctx context.Context, tm *schema.TableMap) error {
	if s.cluster != "" {
		return s.errClusterRebuild("rebuild table", tm)
	}
	shadow := *tm
	shadow.Name = tm.Name + "__ferry_new"
	if err := s.exec(ctx, "DROP TABLE IF EXISTS "+s.table(shadow.Name), "drop table "+s.table(shadow.Name)); err != nil {
		return err
	}
	if err := s.prepareTable(ctx, &shadow); err != nil {
		return err
	}
	return s.SwapTable(ctx, tm, &shadow)
}

// atomicDatabase reports whether the sink's database can EXCHANGE TABLES.
func (s *Sink) atomicDatabase(ctx context.Context) (bool, error) {
	if !s.caps.ExchangeTables {
		return false, nil
	}
	var engine string
	if err := s.conn.QueryRow(ctx, "SELECT engine FROM system.databases WHERE name = ?", s.db).Scan(&engine); err != nil {
		return false, fmt.Errorf("clickhouse: engine of database %s: %w", s.db, err)
	}
	return engine == "Atomic", nil
}
