package replicator_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPublicationCreatedMeanwhile: another session creates ferry's
// publication between ferry's look-up and its CREATE PUBLICATION, as the
// backend of a ferry killed a moment earlier does when it commits late.
// ferry exited with "duplicate key value violates unique constraint
// pg_publication_pubname_index" (seen by ferry torture after kill -9 at the
// start); it must take the publication as found and go on.
func TestPublicationCreatedMeanwhile(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`, `INSERT INTO items SELECT g, 'x' FROM generate_series(1, 10) g`)
	ctx := context.Background()
	other, err := pgx.Connect(ctx, e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `CREATE PUBLICATION ferry FOR TABLE items WITH (publish_via_partition_root = true)`); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	done := make(chan error, 1)
	go func() { done <- e.catchUp(cfg) }()
	// ferry's look-up does not see the uncommitted publication; its CREATE
	// waits on the name's index entry until the other commits.
	deadline := time.Now().Add(time.Minute)
	for !waitingOnLock(t, e) {
		if time.Now().After(deadline) {
			t.Fatal("ferry's CREATE PUBLICATION did not come to wait on the other session's")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("catch up: %v", err)
	}
	if n := e.verifyAll(cfg)["public.items"]; n != 10 {
		t.Errorf("items: %d rows, want 10", n)
	}
}

// waitingOnLock reports whether a session of the test's database waits on
// a lock with a CREATE PUBLICATION.
func waitingOnLock(t *testing.T, e *env) bool {
	t.Helper()
	rows := e.pgStrings(`SELECT count(*)::text FROM pg_stat_activity WHERE datname = current_database()
		AND wait_event_type = 'Lock' AND query LIKE 'CREATE PUBLICATION%'`)
	return len(rows) == 1 && rows[0][0] != "0"
}
