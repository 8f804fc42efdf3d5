package clickhouse

import (
	"context"
	"fmt"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// snapshotTable is where SnapshotState is kept, in the sink's database.
const snapshotTable = "_ferry_snapshots"

// ensureSnapshotTable creates the snapshot state table on first use.
func (s *Sink) ensureSnapshotTable(ctx context.Context) error {
	if s.snapshotReady {
		return nil
	}
	if err := s.exec(ctx, "CREATE DATABASE IF NOT EXISTS "+schema.QuoteCH(s.db),
		fmt.Sprintf("create database %s", s.db)); err != nil {
		return err
	}
	ddl := "CREATE TABLE IF NOT EXISTS " + s.table(snapshotTable) +
		" (slot String, lsn String, done UInt8, updated UInt64) ENGINE = ReplacingMergeTree(updated) ORDER BY slot"
	if err := s.exec(ctx, ddl, fmt.Sprintf("create table %s", s.table(snapshotTable))); err != nil {
		return err
	}
	if err := s.makeDurable(ctx, snapshotTable); err != nil {
		return err
	}
	s.snapshotReady = true
	return nil
}

// SnapshotState returns the last state set for the slot, the zero state
// when none was.
func (s *Sink) SnapshotState(ctx context.Context, slot string) (loader.SnapshotState, error) {
	if err := s.ensureSnapshotTable(ctx); err != nil {
		return loader.SnapshotState{}, err
	}
	q := "SELECT lsn, done FROM " + s.table(snapshotTable) + " FINAL WHERE slot = " + schema.QuoteCHString(slot)
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return loader.SnapshotState{}, s.red.wrap(err, "clickhouse: read snapshot state of slot %q", slot)
	}
	defer rows.Close()
	var st loader.SnapshotState
	for rows.Next() {
		var done uint8
		if err := rows.Scan(&st.LSN, &done); err != nil {
			return loader.SnapshotState{}, s.red.wrap(err, "clickhouse: read snapshot state of slot %q", slot)
		}
		st.Done = done != 0
	}
	if err := rows.Err(); err != nil {
		return loader.SnapshotState{}, s.red.wrap(err, "clickhouse: read snapshot state of slot %q", slot)
	}
	return st, nil
}

// SetSnapshotState records st for the slot; the latest call wins.
func (s *Sink) SetSnapshotState(ctx context.Context, slot string, st loader.SnapshotState) error {
	if err := s.ensureSnapshotTable(ctx); err != nil {
		return err
	}
	updated, err := s.nextUpdated(ctx)
	if err != nil {
		return err
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table(snapshotTable)+" (slot, lsn, done, updated)")
	if err != nil {
		return s.red.wrap(err, "clickhouse: set snapshot state of slot %q", slot)
	}
	done := boolUint8(st.Done)
	if err := batch.Append(slot, st.LSN, done, updated); err != nil {
		_ = batch.Abort()
		return fmt.Errorf("clickhouse: set snapshot state of slot %q: %w", slot, err)
	}
	if err := batch.Send(); err != nil {
		return s.red.wrap(err, "clickhouse: set snapshot state of slot %q", slot)
	}
	return nil
}
