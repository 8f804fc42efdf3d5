package replicator_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/replicator"
)

// TestQuietFlush: with BatchConfig.Quiet, rows are written once the stream
// has nothing more to read, not when the oldest waited MaxAge (here an
// hour): a trickle of single-row transactions and a 100-row one reach
// ClickHouse while ferry runs, and match PostgreSQL.
func TestQuietFlush(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text)`, `INSERT INTO a VALUES (1, 'copied')`)
	cfg := e.config()
	cfg.Batch = replicator.BatchConfig{MaxAge: time.Hour, Quiet: 50 * time.Millisecond}
	e.mustCatchUp(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := e.runInBackground(ctx, cfg, e.sink())
	visible := func(what, query, want string) {
		t.Helper()
		testkit.WaitFor(t, time.Minute, what, func() bool {
			run.alive()
			return e.chStrings(query)[0][0] == want
		})
	}
	for i := 2; i <= 5; i++ {
		n := strconv.Itoa(i)
		e.exec(`INSERT INTO a VALUES (` + n + `, 'trickle')`)
		visible("row "+n, "SELECT toString(count()) FROM "+e.table("a")+" FINAL WHERE _ferry_deleted = 0", n)
	}
	e.exec(`INSERT INTO a SELECT g, 'batch' FROM generate_series(100, 199) g`, `UPDATE a SET v = 'updated' WHERE id = 1`)
	visible("the 100-row transaction and the update", "SELECT v FROM "+e.table("a")+" FINAL WHERE id = 1", "updated")
	run.end()
	if n := e.verifyAll(cfg)["public.a"]; n != 105 {
		t.Errorf("verified %d rows, want 105", n)
	}
}
