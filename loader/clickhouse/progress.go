package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ferry-cdc/ferry/schema"
)

// progressTable is where a running ferry records how far it got, so that
// `ferry status` can tell from anywhere.
const progressTable = "_ferry_progress"

// Progress is a running ferry's last report for its slot.
type Progress struct {
	// ConfirmedLSN is the last position confirmed to PostgreSQL.
	ConfirmedLSN string
	// CaughtUpTo is a time before which every committed transaction is in
	// ClickHouse: the commit time of the last confirmed transaction, or
	// when the confirmation came from an idle stream, the time of it.
	CaughtUpTo time.Time
	// LastError is the text of the last error or retried failure, "" when
	// none; ErrorTime is when it happened.
	LastError string
	ErrorTime time.Time
	// Updated is when the report was written.
	Updated time.Time
}

// ProgressStore reads and writes Progress. Like the Sink it wraps, it is
// meant for one goroutine; give it a Sink of its own when the replicator
// uses the other.
type ProgressStore struct {
	s     *Sink
	ready bool
	last  uint64
}

// NewProgressStore returns a ProgressStore on s's database.
func NewProgressStore(s *Sink) *ProgressStore { return &ProgressStore{s: s} }

func (p *ProgressStore) ensure(ctx context.Context) error {
	if p.ready {
		return nil
	}
	s := p.s
	if err := s.exec(ctx, "CREATE DATABASE IF NOT EXISTS "+schema.QuoteCH(s.db), "create database "+s.db); err != nil {
		return err
	}
	ddl := "CREATE TABLE IF NOT EXISTS " + s.table(progressTable) +
		" (slot String, confirmed_lsn String, caught_up_to Int64, last_error String, error_time Int64, updated UInt64)" +
		" ENGINE = ReplacingMergeTree(updated) ORDER BY slot"
	if err := s.exec(ctx, ddl, "create table "+s.table(progressTable)); err != nil {
		return err
	}
	if err := s.makeDurable(ctx, progressTable); err != nil {
		return err
	}
	p.ready = true
	return nil
}

// Record writes pr for the slot; the latest call wins.
func (p *ProgressStore) Record(ctx context.Context, slot string, pr Progress) error {
	if err := p.ensure(ctx); err != nil {
		return err
	}
	s := p.s
	updated := max(uint64(time.Now().UnixNano()), p.last+1)
	p.last = updated
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table(progressTable)+" (slot, confirmed_lsn, caught_up_to, last_error, error_time, updated)")
	if err != nil {
		return s.red.wrap(err, "clickhouse: record progress of slot %q", slot)
	}
	if err := batch.Append(slot, pr.ConfirmedLSN, unixNano(pr.CaughtUpTo), s.red.scrub(pr.LastError), unixNano(pr.ErrorTime), updated); err != nil {
		_ = batch.Abort()
		return fmt.Errorf("clickhouse: record progress of slot %q: %w", slot, err)
	}
	if err := batch.Send(); err != nil {
		return s.red.wrap(err, "clickhouse: record progress of slot %q", slot)
	}
	return nil
}

// Read returns the slot's last Progress; found is false when none was
// recorded (or the table does not exist yet). It creates nothing.
func (p *ProgressStore) Read(ctx context.Context, slot string) (pr Progress, found bool, err error) {
	s := p.s
	var exists uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = "+schema.QuoteCHString(s.db)+
		" AND name = "+schema.QuoteCHString(progressTable)).Scan(&exists); err != nil {
		return pr, false, s.red.wrap(err, "clickhouse: look up %s", s.table(progressTable))
	}
	if exists == 0 {
		return pr, false, nil
	}
	rows, err := s.conn.Query(ctx, "SELECT confirmed_lsn, caught_up_to, last_error, error_time, updated FROM "+
		s.table(progressTable)+" FINAL WHERE slot = "+schema.QuoteCHString(slot))
	if err != nil {
		return pr, false, s.red.wrap(err, "clickhouse: read progress of slot %q", slot)
	}
	defer rows.Close()
	for rows.Next() {
		var updated uint64
		var caughtUp, errTime int64
		if err := rows.Scan(&pr.ConfirmedLSN, &caughtUp, &pr.LastError, &errTime, &updated); err != nil {
			return pr, false, s.red.wrap(err, "clickhouse: read progress of slot %q", slot)
		}
		pr.Updated = time.Unix(0, int64(updated)).UTC()
		pr.CaughtUpTo, pr.ErrorTime = fromUnixNano(caughtUp), fromUnixNano(errTime)
		found = true
	}
	if err := rows.Err(); err != nil {
		return pr, false, s.red.wrap(err, "clickhouse: read progress of slot %q", slot)
	}
	return pr, found, nil
}

// Times are kept as Unix nanoseconds (0 for none): DateTime64 needs
// ClickHouse 20.1.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// StateTables are the tables ferry keeps its own state in, next to the
// replicated ones.
func StateTables() []string { return []string{snapshotTable, progressTable, tableStateTable} }

// DropTable drops a table of the sink's database, if it exists; on a
// cluster ON CLUSTER, with its local tables.
func (s *Sink) DropTable(ctx context.Context, name string) error {
	if s.cluster != "" {
		for _, t := range []string{name, schema.LocalName(name)} {
			if err := s.exec(ctx, schema.DropTableSQL(s.db, t, s.cluster), "drop table "+s.table(t)); err != nil {
				return err
			}
		}
		return nil
	}
	return s.exec(ctx, "DROP TABLE IF EXISTS "+s.table(name), "drop table "+s.table(name))
}
