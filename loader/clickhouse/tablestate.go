package clickhouse

import (
	"context"
	"fmt"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// tableStateTable keeps, per slot and table, the source description the
// ClickHouse table was last made to match.
const tableStateTable = "_ferry_tables"

var _ loader.TableStateStore = (*Sink)(nil)

func (s *Sink) ensureTableStateTable(ctx context.Context) error {
	if s.tableStateReady {
		return nil
	}
	if err := s.ensureSnapshotTable(ctx); err != nil { // creates the database too
		return err
	}
	ddl := "CREATE TABLE IF NOT EXISTS " + s.table(tableStateTable) +
		" (slot String, oid UInt32, state String, updated UInt64) ENGINE = ReplacingMergeTree(updated) ORDER BY (slot, oid)"
	if err := s.exec(ctx, ddl, fmt.Sprintf("create table %s", s.table(tableStateTable))); err != nil {
		return err
	}
	if err := s.makeDurable(ctx, tableStateTable); err != nil {
		return err
	}
	s.tableStateReady = true
	return nil
}

// TableStates returns the last state set for each table of the slot.
func (s *Sink) TableStates(ctx context.Context, slot string) (map[uint32][]byte, error) {
	if err := s.ensureTableStateTable(ctx); err != nil {
		return nil, err
	}
	q := "SELECT oid, state FROM " + s.table(tableStateTable) + " FINAL WHERE slot = " + schema.QuoteCHString(slot)
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return nil, s.red.wrap(err, "clickhouse: read table states of slot %q", slot)
	}
	defer rows.Close()
	states := map[uint32][]byte{}
	for rows.Next() {
		var oid uint32
		var state string
		if err := rows.Scan(&oid, &state); err != nil {
			return nil, s.red.wrap(err, "clickhouse: read table states of slot %q", slot)
		}
		states[oid] = []byte(state)
	}
	if err := rows.Err(); err != nil {
		return nil, s.red.wrap(err, "clickhouse: read table states of slot %q", slot)
	}
	return states, nil
}

// SetTableState records a table's state for the slot; the latest call wins.
func (s *Sink) SetTableState(ctx context.Context, slot string, oid uint32, state []byte) error {
	if err := s.ensureTableStateTable(ctx); err != nil {
		return err
	}
	updated, err := s.nextUpdated(ctx)
	if err != nil {
		return err
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table(tableStateTable)+" (slot, oid, state, updated)")
	if err != nil {
		return s.red.wrap(err, "clickhouse: set table state of slot %q", slot)
	}
	if err := batch.Append(slot, oid, string(state), updated); err != nil {
		_ = batch.Abort()
		return fmt.Errorf("clickhouse: set table state of slot %q: %w", slot, err)
	}
	if err := batch.Send(); err != nil {
		return s.red.wrap(err, "clickhouse: set table state of slot %q", slot)
	}
	return nil
}

// nextUpdated is the updated value of the next state row. ReplacingMergeTree
// keeps the row with the highest, so it must exceed every one written
// before, by this process or an earlier one whose clock ran ahead (a clock
// stepped back across a restart would otherwise let the stale state win):
// the first call reads the highest stored, and every value is above the
// last. The clock only keeps values readable as times.
func (s *Sink) nextUpdated(ctx context.Context) (uint64, error) {
	if !s.updatedRead {
		if err := s.ensureTableStateTable(ctx); err != nil {
			return 0, err
		}
		for _, t := range []string{snapshotTable, tableStateTable} {
			var top uint64
			q := "SELECT max(updated) FROM " + s.table(t)
			if err := s.conn.QueryRow(ctx, q).Scan(&top); err != nil {
				return 0, s.red.wrap(err, "clickhouse: read the latest state of %s", s.table(t))
			}
			s.lastUpdated = max(s.lastUpdated, top)
		}
		s.updatedRead = true
	}
	s.lastUpdated = max(uint64(s.now().UnixNano()), s.lastUpdated+1)
	return s.lastUpdated, nil
}
