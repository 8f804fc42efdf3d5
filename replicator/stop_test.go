package replicator_test

import (
	"context"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

// TestStopCutsWriteShort stops ferry while it writes a batch, the insert
// failing with the closed connection's error (as the ClickHouse client's
// does when the stop lands on it) instead of the context's. The stop must
// be clean: ferry writes the batch again on a fresh connection, confirms
// it, and returns nil.
func TestStopCutsWriteShort(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id bigint PRIMARY KEY, v text NOT NULL)`,
		`INSERT INTO items SELECT g, 'seed' FROM generate_series(1, 1000) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)

	// One transaction, flushed whole: the write cut short is all of it.
	cfg.Batch.MaxAge = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := e.sink()
	w := testkit.NewStopMidWrite(s, cancel)
	r, err := replicator.New(cfg, w, s, s.Capabilities(), clickhouse.IsRetryable)
	if err != nil {
		t.Fatal(err)
	}
	w.Arm()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	// lsn is inside the transaction, after its rows: its commit is past it
	// (pg_current_wal_lsn after the commit could be past other tests' WAL
	// too, which ferry has no reason to confirm yet).
	var lsn string
	tx, err := e.pg.Begin(context.Background())
	if err == nil {
		_, err = tx.Exec(context.Background(), `INSERT INTO items SELECT g, 'streamed ' || g FROM generate_series(1001, 3000) g`)
	}
	if err == nil {
		err = tx.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn)
	}
	if err == nil {
		err = tx.Commit(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Fired:
	case err := <-errc:
		t.Fatalf("ferry returned (%v) before it wrote anything", err)
	case <-time.After(time.Minute):
		t.Fatal("ferry wrote nothing within a minute")
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("a stop in the middle of a write: %v (want a clean stop)", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ferry did not stop within a minute of the cancel")
	}
	// The rows of the write cut short were written again before the stop.
	e.verifyAll(cfg)
	var confirmed bool
	if err := e.pg.QueryRow(context.Background(),
		`SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, e.slot, lsn).Scan(&confirmed); err != nil {
		t.Fatal(err)
	}
	if !confirmed {
		t.Errorf("the slot did not confirm the transaction (past %s) written before the stop", lsn)
	}
}
