package clickhouse

import (
	"context"

	"github.com/ferry-cdc/ferry/schema"
)

// DatabaseExists reports whether the sink's database exists on this
// server. ferry run asks before it starts, to know whether the database is
// its own to drop after a failed first start (DropIfUnused).
func (s *Sink) DatabaseExists(ctx context.Context) (bool, error) {
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = "+
		schema.QuoteCHString(s.db)).Scan(&n); err != nil {
		return false, s.red.wrap(err, "clickhouse: look up database %s", s.db)
	}
	return n > 0, nil
}

// DropIfUnused drops the sink's database when it holds nothing a later
// start or a user needs: every table in it is empty, but for the progress
// table (whose row is the failed run's last error, which the user was
// just shown). The tables a start makes before it fails (the state tables,
// the replicated tables' empty ClickHouse tables) are made again by the
// next. It reports whether it dropped it. The caller calls it only for a
// database it saw missing when it started, so a database a user made is
// never dropped; on a cluster it does nothing (the database is on every
// server, and a drop ON CLUSTER waits for them all).
func (s *Sink) DropIfUnused(ctx context.Context) (bool, error) {
	if s.cluster != "" {
		return false, nil
	}
	rows, err := s.conn.Query(ctx, "SELECT name FROM system.tables WHERE database = "+schema.QuoteCHString(s.db))
	if err != nil {
		return false, s.red.wrap(err, "clickhouse: list the tables of %s", s.db)
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return false, s.red.wrap(err, "clickhouse: list the tables of %s", s.db)
		}
		names = append(names, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, s.red.wrap(err, "clickhouse: list the tables of %s", s.db)
	}
	for _, name := range names {
		if name == progressTable {
			continue
		}
		// count(), not system.tables' total_rows: ClickHouse 18.16 has none.
		var n uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM "+s.table(name)).Scan(&n); err != nil {
			return false, s.red.wrap(err, "clickhouse: count the rows of %s", s.table(name))
		}
		if n > 0 {
			return false, nil
		}
	}
	if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+schema.QuoteCH(s.db), "drop database "+s.db); err != nil {
		return false, err
	}
	return true, nil
}
