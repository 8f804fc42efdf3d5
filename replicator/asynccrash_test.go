package replicator_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// TestCopyCutAcrossCrash copies a table (its ClickHouse table was lost)
// under a snapshot that sees a transaction committed with
// synchronous_commit = off, whose WAL the server has not flushed yet; then
// PostgreSQL crashes and loses that transaction. The copy had written its
// effects to ClickHouse, and no change of the stream undoes them: the rows
// it inserted stayed in ClickHouse, and the row whose key it changed was
// missing under its old key, so that an update of that row that left its
// TOASTed column unchanged stopped every start ("no value for unchanged
// (TOASTed) column"; ferry torture seed 331025 round 2, which crashes
// PostgreSQL shortly after ferry's first start, its role committing
// asynchronously).
func TestCopyCutAcrossCrash(t *testing.T) {
	pg := startPrivatePG(t)
	e := newEnvAt(t, pg.URL)
	e.adminExec(`ALTER SYSTEM SET wal_writer_delay = '10s'`, `ALTER SYSTEM SET wal_writer_flush_after = '16MB'`, `SELECT pg_reload_conf()`)
	e.exec(`CREATE TABLE docs (id int PRIMARY KEY, body text)`,
		`ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL`,
		`INSERT INTO docs VALUES (1, repeat('a', 10000))`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	if err := e.ch.Exec(context.Background(), "DROP TABLE "+e.table("docs")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	async, err := pgx.Connect(ctx, e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer async.Close(ctx)
	var lost string
	for _, q := range []string{`SET synchronous_commit = off`, `BEGIN`,
		`INSERT INTO docs SELECT g, repeat(md5(g::text), 1000) FROM generate_series(100, 120) g`,
		`UPDATE docs SET id = 5 WHERE id = 1`} {
		if _, err := async.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := async.QueryRow(ctx, `SELECT txid_current()::text`).Scan(&lost); err != nil {
		t.Fatal(err)
	}
	if _, err := async.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	// Streaming, not a catch-up, which would wait for these commits to
	// be flushed; the copy of docs runs at the start.
	stop := e.streamInBackground(cfg)
	testkit.WaitFor(t, 2*time.Minute, "the copy of docs", func() bool {
		rows := e.chStrings("SELECT toString(count()) FROM system.tables WHERE database = '" + e.db + "' AND name = 'docs'")
		return rows[0][0] == "1" && e.chStrings("SELECT toString(count()) FROM " + e.table("docs") + " FINAL")[0][0] == "22"
	})
	pg.restart("immediate")
	e.reconnect()
	var again string
	tx, err := e.pg.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO docs VALUES (2, repeat('b', 10000))`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT txid_current()::text`).Scan(&again); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("transaction %s committed asynchronously; after the crash %s of its rows are left, and the next transaction is %s",
		lost, e.pgStrings(`SELECT count(*)::text FROM docs WHERE id >= 100`)[0][0], again)
	e.exec(`UPDATE docs SET id = 3 WHERE id = 2`, `UPDATE docs SET id = 6 WHERE id = 1`)
	stop() // and a catch-up
	e.verifyAll(cfg)
}
