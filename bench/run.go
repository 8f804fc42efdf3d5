package bench

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seedStream is the key stream of the seeding pass; load clients use
// streams from 1.
const seedStream = 1 << 50

// table is a strategy's table during one run.
type table struct {
	s        Strategy
	rel      relations
	keys     *existingKeys
	expected int64 // rows the table must hold
	cdc      *cdc
}

// strategy benchmarks one strategy. Every run gets a table of its own,
// created and seeded the same way, so runs are replicates of each other.
func (b *bencher) strategy(ctx context.Context, s Strategy) error {
	for wi, w := range b.cfg.Workloads {
		for ci, clients := range b.cfg.Clients {
			e, err := b.entry(ctx, s, w, clients, wi*len(b.cfg.Clients)+ci)
			if err != nil {
				return err
			}
			b.res.Runs = append(b.res.Runs, e)
		}
	}
	if !b.cfg.Keep {
		if _, err := b.db.Exec(ctx, "DROP TABLE IF EXISTS "+s.Qualified()); err != nil {
			return fmt.Errorf("drop %s: %w", s.Qualified(), err)
		}
	}
	return nil
}

// create makes the table anew, fills it with the seed rows and vacuums it,
// so that hint bits and the visibility map are set before anything is
// timed. Autovacuum is off for the table: its WAL would count as the
// workload's.
func (b *bencher) create(ctx context.Context, s Strategy) (*table, error) {
	t := &table{s: s}
	if _, err := b.db.Exec(ctx, "DROP TABLE IF EXISTS "+s.Qualified()); err != nil {
		return nil, fmt.Errorf("drop %s: %w", s.Qualified(), err)
	}
	for _, q := range s.DDL(b.cfg.Partitions, b.cfg.PayloadBytes) {
		if _, err := b.db.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("create table: %w", err)
		}
	}
	var err error
	if t.rel, err = findRelations(ctx, b.db, s.Qualified()); err != nil {
		return nil, err
	}
	if err := b.autovacuumOff(ctx, t.rel); err != nil {
		return nil, err
	}
	b.cfg.Progress(b.done, b.total, fmt.Sprintf("%s: seeding %d rows", s.Name, b.cfg.SeedRows))
	if t.keys, err = b.seed(ctx, s); err != nil {
		return nil, fmt.Errorf("seed %s: %w", s.Qualified(), err)
	}
	t.expected = int64(b.cfg.SeedRows)
	if _, err := b.db.Exec(ctx, "VACUUM (ANALYZE) "+s.Qualified()); err != nil {
		return nil, fmt.Errorf("vacuum %s: %w", s.Qualified(), err)
	}
	ff, err := indexFillfactor(ctx, b.db, t.rel.indexes[0])
	if err != nil {
		return nil, err
	}
	b.res.Settings.Fillfactor[s.Name] = ff
	return t, nil
}

// autovacuumOff turns autovacuum off for every heap of the table and its
// TOAST table; a partitioned parent has no storage to vacuum.
func (b *bencher) autovacuumOff(ctx context.Context, rel relations) error {
	for _, h := range rel.heaps {
		var name string
		var toast bool
		if err := b.db.QueryRow(ctx, `SELECT oid::regclass::text, reltoastrelid <> 0 FROM pg_class WHERE oid = $1`, h).Scan(&name, &toast); err != nil {
			return fmt.Errorf("autovacuum off: %w", err)
		}
		opts := "autovacuum_enabled = off"
		if toast {
			opts += ", toast.autovacuum_enabled = off"
		}
		if _, err := b.db.Exec(ctx, "ALTER TABLE "+name+" SET ("+opts+")"); err != nil {
			return fmt.Errorf("autovacuum off for %s: %w", name, err)
		}
	}
	return nil
}

func (b *bencher) payload() string { return strings.Repeat("x", b.cfg.PayloadBytes) }

// seed inserts the seed rows. Client-side keys come from their own stream
// with a clock that ends a minute before ClockStart and steps 1 ms every
// 100 keys, so every seeded time-ordered key sorts before the load's keys,
// and the seed rows are the same in every run and every invocation.
func (b *bencher) seed(ctx context.Context, s Strategy) (*existingKeys, error) {
	n := b.cfg.SeedRows
	keys := &existingKeys{n: n}
	if !s.clientKeys() {
		q := "INSERT INTO " + s.Qualified() + " (customer_id, total) SELECT g * 7919 % 1000000 + 1, (g % 100000) / 100.0 FROM generate_series(1, $1::bigint) g"
		args := []any{n}
		if b.cfg.PayloadBytes > 0 {
			q = strings.Replace(q, "total)", "total, payload)", 1)
			q = strings.Replace(q, "100.0 FROM", "100.0, $2 FROM", 1)
			args = append(args, b.payload())
		}
		if _, err := b.db.Exec(ctx, q, args...); err != nil {
			return nil, err
		}
		if s.kind == serverUUID {
			return b.readUUIDs(ctx, s, n)
		}
		return keys, nil
	}
	tick := 0
	start := ClockStart.Add(-time.Duration(n/100+60_000) * time.Millisecond)
	clock := func() time.Time { tick++; return start.Add(time.Duration(tick/100) * time.Millisecond) }
	gen := s.generator(b.cfg.KeySeed, seedStream, clock)
	rng := newRand(b.cfg.KeySeed, seedStream|1<<40)
	cols := []string{"id", "customer_id", "total"}
	if b.cfg.PayloadBytes > 0 {
		cols = append(cols, "payload")
	}
	payload := b.payload()
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		k := gen.next()
		switch v := k.(type) {
		case pgtype.UUID:
			keys.uuids = append(keys.uuids, v.Bytes)
		case int64:
			keys.ints = append(keys.ints, v)
		}
		i++
		row := []any{k, rng.Int64N(1_000_000) + 1, pgtype.Numeric{Int: big.NewInt(rng.Int64N(100_000)), Exp: -2, Valid: true}}
		if payload != "" {
			row = append(row, payload)
		}
		return row, nil
	})
	if _, err := b.db.CopyFrom(ctx, pgx.Identifier{Schema, s.Table()}, cols, src); err != nil {
		return nil, err
	}
	return keys, nil
}

func (b *bencher) readUUIDs(ctx context.Context, s Strategy, n int) (*existingKeys, error) {
	rows, err := b.db.Query(ctx, "SELECT id FROM "+s.Qualified())
	if err != nil {
		return nil, err
	}
	keys := &existingKeys{n: n, uuids: make([]UUID, 0, n)}
	for rows.Next() {
		var u pgtype.UUID
		if err := rows.Scan(&u); err != nil {
			return nil, err
		}
		keys.uuids = append(keys.uuids, u.Bytes)
	}
	return keys, rows.Err()
}

// loadPool opens the load clients' connections with the session settings
// the benchmark asks for.
func (b *bencher) loadPool(ctx context.Context, clients int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(b.cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("parse URL: %w", err)
	}
	pc.MaxConns = int32(clients)
	pc.ConnConfig.RuntimeParams["application_name"] = b.loadApp
	pc.ConnConfig.RuntimeParams["synchronous_commit"] = b.cfg.SynchronousCommit
	db, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open load connections: %w", err)
	}
	return db, nil
}

// waitLoadGone waits until the load backends have exited, so that they
// have flushed their statistics (pg_stat_wal for the fallback, the table's
// counts).
func (b *bencher) waitLoadGone(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := b.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, b.loadApp).Scan(&n); err != nil {
			return fmt.Errorf("wait for the load connections to close: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d load connections still open 10 s after the load", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
