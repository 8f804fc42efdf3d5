package replicator_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/replicator"
)

// lowDecodingMemory makes a connection URL's sessions, the walsender's
// among them, stream every transaction over 64 kB: logical_decoding_work_mem
// is a per-session setting, so the shared server is not touched.
func lowDecodingMemory(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-clogical_decoding_work_mem=64kB")
	u.RawQuery = q.Encode()
	return u.String()
}

// newStreamingEnv is an env whose ferry streams transactions in progress,
// and the config for it.
func newStreamingEnv(t *testing.T) (*env, replicator.Config) {
	e := newEnv(t)
	e.pgURL = lowDecodingMemory(t, e.pgURL)
	cfg := e.config()
	cfg.Streaming = replicator.StreamingOn
	cfg.SpillDir = t.TempDir()
	return e, cfg
}

// begin opens a transaction on a connection of its own.
func (e *env) begin() pgx.Tx {
	e.t.Helper()
	conn, err := pgx.Connect(context.Background(), e.pgURL)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return tx
}

func txExec(t *testing.T, tx pgx.Tx, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := tx.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// streamedTxns is how many transactions the server has streamed to the
// env's slot.
func (e *env) streamedTxns() int64 {
	e.t.Helper()
	var n int64
	if err := e.pg.QueryRow(context.Background(), `SELECT coalesce(sum(stream_txns), 0)::bigint FROM pg_stat_replication_slots WHERE slot_name = $1`, e.slot).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// waitStreamed waits until the server has streamed more than before
// transactions to the slot and sent everything written so far.
func (e *env) waitStreamed(before int64) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for e.streamedTxns() <= before {
		if time.Now().After(deadline) {
			e.t.Fatal("PostgreSQL streamed no transaction in progress within 2 minutes: is logical_decoding_work_mem low for the walsender?")
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.waitSent()
}

// chRawCount counts every row version in ClickHouse matching where.
func (e *env) chRawCount(table, where string) string {
	e.t.Helper()
	return e.chStrings("SELECT toString(count()) FROM " + e.table(table) + " WHERE " + where)[0][0]
}

// notVisible waits longer than a batch's age and asserts that ClickHouse
// holds no version at all of the rows matching where.
func (e *env) notVisible(table, where, why string) {
	e.t.Helper()
	time.Sleep(time.Second)
	if n := e.chRawCount(table, where); n != "0" {
		e.t.Fatalf("%s: ClickHouse holds %s rows of %s WHERE %s", why, n, table, where)
	}
}

// waitRaw waits until ClickHouse holds want row versions matching where:
// the background ferry, not the catch-up after it, must have written a
// streamed transaction for the test to test streaming.
func (e *env) waitRaw(table, where, want string) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		got := e.chRawCount(table, where)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("ClickHouse holds %s rows of %s WHERE %s after 60 s, want %s", got, table, where, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const streamSchema = `CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, pad text NOT NULL)`

// TestStreamedCommit streams a large transaction in progress while small
// ones on the same table commit in between: none of its rows may be in
// ClickHouse before its commit, and afterwards ClickHouse equals
// PostgreSQL.
func TestStreamedCommit(t *testing.T) {
	e, cfg := newStreamingEnv(t)
	e.exec(streamSchema, `INSERT INTO items SELECT g, 0, 'seed' FROM generate_series(1, 100) g`)
	e.mustCatchUp(cfg)
	stop := e.streamInBackground(cfg)
	before := e.streamedTxns()
	tx := e.begin()
	txExec(t, tx, `INSERT INTO items SELECT g, 1, repeat('x', 100) FROM generate_series(100000, 119999) g`,
		`UPDATE items SET v = v + 10 WHERE id BETWEEN 100000 AND 100999`,
		`DELETE FROM items WHERE id BETWEEN 101000 AND 101099`)
	for i := 0; i < 20; i++ { // small transactions on the same table, committed in between
		e.exec(fmt.Sprintf(`INSERT INTO items VALUES (%d, 2, 'small')`, 1000+i),
			fmt.Sprintf(`UPDATE items SET v = v + 1 WHERE id = %d`, i%100+1))
	}
	e.waitStreamed(before)
	e.notVisible("items", "id >= 100000", "before its commit")
	if n := e.chRawCount("items", "id BETWEEN 1000 AND 1019"); n != "20" {
		t.Errorf("the small transactions committed while the large one was open: %s rows in ClickHouse, want 20", n)
	}
	txExec(t, tx, `INSERT INTO items SELECT g, 3, 'late' FROM generate_series(120000, 124999) g`)
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The transaction's last rows: one version per key, which background
	// merges (26.7 runs them at once) cannot fold, unlike a count of every
	// version of the transaction's rows.
	e.waitRaw("items", "id BETWEEN 120000 AND 124999", "5000")
	stop()
	counts := e.verifyAll(cfg)
	if want := uint64(100 + 20 + 20000 - 100 + 5000); counts["public.items"] != want {
		t.Errorf("items: %d rows, want %d", counts["public.items"], want)
	}
}

// TestStreamedAbort streams a large transaction that rolls back: none of
// its rows may ever reach ClickHouse, while the small transactions around
// it do.
func TestStreamedAbort(t *testing.T) {
	e, cfg := newStreamingEnv(t)
	e.exec(streamSchema, `INSERT INTO items SELECT g, 0, 'seed' FROM generate_series(1, 100) g`)
	e.mustCatchUp(cfg)
	stop := e.streamInBackground(cfg)
	before := e.streamedTxns()
	tx := e.begin()
	txExec(t, tx, `INSERT INTO items SELECT g, 1, repeat('x', 100) FROM generate_series(100000, 119999) g`,
		`UPDATE items SET v = 99, pad = 'aborted' WHERE id <= 50`)
	e.exec(`INSERT INTO items VALUES (1000, 2, 'small before')`)
	e.waitStreamed(before)
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO items VALUES (1001, 2, 'small after')`, `UPDATE items SET v = 5 WHERE id = 60`)
	e.waitRaw("items", "id = 60 AND v = 5", "1")
	stop()
	e.notVisible("items", "id >= 100000 OR pad = 'aborted'", "after its rollback")
	counts := e.verifyAll(cfg)
	if counts["public.items"] != 102 {
		t.Errorf("items: %d rows, want 102", counts["public.items"])
	}
}

// TestStreamedSubtransactionAbort rolls back savepoints, a nested one
// among them, inside a streamed transaction that commits: exactly the
// rolled-back subtransactions' changes must be missing.
func TestStreamedSubtransactionAbort(t *testing.T) {
	e, cfg := newStreamingEnv(t)
	e.exec(streamSchema, `INSERT INTO items SELECT g, 0, 'seed' FROM generate_series(1, 100) g`)
	e.mustCatchUp(cfg)
	stop := e.streamInBackground(cfg)
	before := e.streamedTxns()
	tx := e.begin()
	txExec(t, tx,
		`INSERT INTO items SELECT g, 1, repeat('a', 100) FROM generate_series(100000, 104999) g`,
		`SAVEPOINT a`,
		`INSERT INTO items SELECT g, 1, repeat('b', 100) FROM generate_series(200000, 204999) g`,
		`UPDATE items SET pad = 'rolled back a' WHERE id <= 10`,
		`ROLLBACK TO SAVEPOINT a`,
		`SAVEPOINT b`,
		`INSERT INTO items SELECT g, 1, repeat('c', 100) FROM generate_series(300000, 304999) g`,
		`SAVEPOINT c`,
		`INSERT INTO items SELECT g, 1, repeat('d', 100) FROM generate_series(400000, 404999) g`,
		`RELEASE SAVEPOINT c`,
		`SAVEPOINT d`,
		`DELETE FROM items WHERE id BETWEEN 100000 AND 100999`,
		`ROLLBACK TO SAVEPOINT b`, // b, c (released into b) and d
		`SAVEPOINT e`,
		`UPDATE items SET pad = 'kept e' WHERE id BETWEEN 11 AND 20`,
		`RELEASE SAVEPOINT e`,
		`INSERT INTO items SELECT g, 1, repeat('f', 100) FROM generate_series(500000, 504999) g`)
	e.exec(`INSERT INTO items VALUES (1000, 2, 'small')`)
	e.waitStreamed(before)
	e.notVisible("items", "id >= 100000 OR pad = 'kept e'", "before its commit")
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitRaw("items", "id >= 500000", "5000")
	stop()
	e.notVisible("items", "id >= 200000 AND id < 500000 OR pad = 'rolled back a'", "after ROLLBACK TO")
	counts := e.verifyAll(cfg)
	if counts["public.items"] != 100+1+5000+5000 {
		t.Errorf("items: %d rows, want %d", counts["public.items"], 100+1+5000+5000)
	}
	sameRows(t, "kept e", e.chStrings("SELECT toString(count()) FROM "+e.table("items")+" FINAL WHERE pad = 'kept e'"), [][]string{{"10"}})
}

// TestStreamedKill kills ferry (SIGKILL) twice: while a streamed
// transaction is open and ferry has confirmed positions past its first
// change, and in the middle of replaying it after its commit. The
// restarted ferry must receive the whole transaction again and lose or
// double nothing, and no spill file may be left behind.
func TestStreamedKill(t *testing.T) {
	e := newEnv(t)
	e.pgURL = lowDecodingMemory(t, e.pgURL)
	bin := buildFerry(t)
	spill := t.TempDir()
	e.exec(streamSchema, `INSERT INTO items SELECT g, 0, 'seed' FROM generate_series(1, 100) g`)
	args := []string{"run", "--pg", e.pgURL, "--ch", e.chURL, "--slot", e.slot, "--streaming", "on", "--spill-dir", spill,
		"--batch-rows", "2000", "--log-level", "warn", "--metrics-addr", ""}
	p := startMeasured(t, bin, args...)
	p.waitFor("the initial copy", func() bool { return e.chCount("items") == 100 })

	before := e.streamedTxns()
	var first string
	if err := e.pg.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	tx := e.begin()
	txExec(t, tx, `INSERT INTO items SELECT g, 1, repeat('x', 100) FROM generate_series(100000, 399999) g`)
	e.waitStreamed(before)
	// Small transactions commit after the large one's first change, and
	// ferry confirms them.
	p.waitFor("a confirmed position past the open transaction's first change", func() bool {
		e.exec(`UPDATE items SET v = v + 1 WHERE id = 1`)
		var past bool
		if err := e.pg.QueryRow(context.Background(), `SELECT confirmed_flush_lsn > $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, e.slot, first).Scan(&past); err != nil {
			t.Fatal(err)
		}
		return past
	})
	p.kill()
	streamed := e.streamedTxns()
	p = startMeasured(t, bin, args...)
	txExec(t, tx, `UPDATE items SET v = 2 WHERE id BETWEEN 100000 AND 100999`)
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.waitFor("part of the replayed transaction", func() bool { return e.chCount("items") > 100+20000 })
	p.kill()
	if e.streamedTxns() <= streamed {
		t.Error("the restarted ferry received the transaction unstreamed: the kill did not land in the replay of a streamed transaction")
	}
	if n := e.chCount("items"); n >= 100+300000+1000 {
		t.Errorf("the replay had finished (%d rows) before the kill: the kill did not land mid-replay", n)
	}
	if left, _ := os.ReadDir(spill); len(left) != 0 {
		t.Errorf("spill files left behind after SIGKILL: %v", left)
	}
	catch := startMeasured(t, bin, append(args, "--catch-up")...)
	catch.wait()
	counts := e.verifyAll(e.config())
	if counts["public.items"] != 100+300000 {
		t.Errorf("items: %d rows, want %d", counts["public.items"], 100+300000)
	}
}

// TestStreamedSchemaChange changes the table's shape inside a streamed
// transaction, once for good and once in a subtransaction that rolls
// back: the rows after each change have its shape, and ClickHouse ends
// with PostgreSQL's.
func TestStreamedSchemaChange(t *testing.T) {
	e, cfg := newStreamingEnv(t)
	e.exec(streamSchema, `INSERT INTO items SELECT g, 0, 'seed' FROM generate_series(1, 100) g`)
	e.mustCatchUp(cfg)
	stop := e.streamInBackground(cfg)
	before := e.streamedTxns()
	tx := e.begin()
	txExec(t, tx,
		`INSERT INTO items SELECT g, 1, repeat('a', 100) FROM generate_series(100000, 109999) g`,
		`ALTER TABLE items ADD COLUMN extra text`,
		`INSERT INTO items SELECT g, 2, repeat('b', 100), 'x' || g FROM generate_series(200000, 204999) g`,
		`SAVEPOINT s`,
		`ALTER TABLE items ADD COLUMN gone int`,
		`INSERT INTO items SELECT g, 3, repeat('c', 100), 'y', g FROM generate_series(300000, 304999) g`,
		`ROLLBACK TO SAVEPOINT s`,
		`INSERT INTO items SELECT g, 4, repeat('d', 100), 'z' || g FROM generate_series(400000, 400999) g`)
	e.waitStreamed(before)
	e.notVisible("items", "id >= 100000", "before its commit")
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO items VALUES (1000, 5, 'after', 'after')`)
	e.waitRaw("items", "id >= 400000", "1000")
	stop()
	counts := e.verifyAll(cfg)
	if want := uint64(100 + 10000 + 5000 + 1000 + 1); counts["public.items"] != want {
		t.Errorf("items: %d rows, want %d", counts["public.items"], want)
	}
	if got := e.chStrings("SELECT name FROM system.columns WHERE database = '" + e.db + "' AND table = 'items' AND name IN ('extra', 'gone')"); fmt.Sprint(got) != "[[extra]]" {
		t.Errorf("ClickHouse columns extra/gone: %v, want only extra", got)
	}
}
