package replicator_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/replicator"
)

// copyIn loads n rows into ev (n int, v text) with COPY FROM STDIN, in one
// transaction: PostgreSQL writes them as multi-insert records, one per
// heap page, whose changes share a WAL position. Rows repeat every 100, so
// equal rows must be kept apart too.
func (e *env) copyIn(table string, n int) {
	e.t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d\tcopied %d\n", i%100, i%100)
	}
	if _, err := e.pg.PgConn().CopyFrom(context.Background(), strings.NewReader(b.String()), "COPY "+table+" (n, v) FROM STDIN"); err != nil {
		e.t.Fatal(err)
	}
}

// chFinal counts a table's rows as FINAL sees them.
func (e *env) chFinal(table string) int {
	e.t.Helper()
	n, _ := strconv.Atoi(e.chStrings("SELECT toString(count()) FROM " + e.table(table) + " FINAL")[0][0])
	return n
}

func appendOnlyConfig(e *env) replicator.Config {
	cfg := e.config()
	cfg.AppendOnly = []string{"public.ev"}
	return cfg
}

// TestAppendOnlyCopyFrom streams a COPY into an append-only table: every
// row must arrive, though the rows of one heap page share a WAL position.
func TestAppendOnlyCopyFrom(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE ev (n int, v text)`, `INSERT INTO ev VALUES (0, 'seed')`)
	cfg := appendOnlyConfig(e)
	e.mustCatchUp(cfg)
	e.copyIn("ev", 20000)
	e.exec(`INSERT INTO ev SELECT g % 7, 'selected' FROM generate_series(1, 3000) g`)
	e.mustCatchUp(cfg)
	if n := e.chFinal("ev"); n != 23001 {
		t.Errorf("ClickHouse holds %d rows of ev, PostgreSQL 23001", n)
	}
	e.verifyAll(cfg)
}

// TestAppendOnlyCopyKilled kills ferry while it writes a 100,000-row COPY
// into an append-only table, unstreamed and streamed, restarts it, and
// checks that the replayed rows collapse onto the first writes: none lost,
// none doubled.
func TestAppendOnlyCopyKilled(t *testing.T) {
	for _, streaming := range []string{"off", "on"} {
		t.Run("streaming="+streaming, func(t *testing.T) {
			e := newEnv(t)
			if streaming == "on" {
				e.pgURL = lowDecodingMemory(t, e.pgURL)
			}
			bin := buildFerry(t)
			e.exec(`CREATE TABLE ev (n int, v text)`, `INSERT INTO ev VALUES (0, 'seed')`)
			args := []string{"run", "--pg", e.pgURL, "--ch", e.chURL, "--slot", e.slot, "--append-only", "public.ev",
				"--streaming", streaming, "--spill-dir", t.TempDir(), "--batch-rows", "2000", "--log-level", "warn", "--metrics-addr", ""}
			p := startMeasured(t, bin, args...)
			p.waitFor("the initial copy", func() bool { return e.chCount("ev") == 1 })
			e.copyIn("ev", 100000)
			p.waitFor("part of the COPY", func() bool { return e.chCount("ev") > 20000 })
			p.kill()
			if n := e.chCount("ev"); n >= 100001 {
				t.Fatalf("the COPY was all written (%d rows) before the kill: the kill did not land mid-transaction", n)
			}
			p = startMeasured(t, bin, args...)
			p.waitFor("more of the replayed COPY", func() bool { return e.chCount("ev") > 40000 })
			p.kill()
			catch := startMeasured(t, bin, append(args, "--catch-up")...)
			catch.wait()
			if n := e.chFinal("ev"); n != 100001 {
				t.Errorf("ClickHouse holds %d rows of ev, PostgreSQL 100001", n)
			}
			e.verifyAll(appendOnlyConfig(e))
		})
	}
}
