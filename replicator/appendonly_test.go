package replicator_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
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

// waitCH waits until a ClickHouse query gives want.
func (e *env) waitCH(query string, want [][]string) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := e.chStrings(query)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: got %v after 2 minutes, want %v", query, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRebuildKeepsLaterCommit: a transaction that changed a row before the
// change that triggers a rebuild, but commits after the rebuild's copy,
// must win over the copy's row, though its change's WAL position is lower.
func TestRebuildKeepsLaterCommit(t *testing.T) {
	e := newEnv(t) // no ferry setup: the Relation message triggers the rebuild
	e.exec(`CREATE TABLE t (id int PRIMARY KEY, v text)`, `INSERT INTO t SELECT g, 'old' FROM generate_series(1, 10) g`)
	cfg := e.config()
	cfg.StandbyInterval = time.Second
	e.mustCatchUp(cfg)
	stop := e.streamInBackground(cfg)
	e.exec(`ALTER TABLE t ADD COLUMN d int DEFAULT 7`) // the rows hold 7, which ClickHouse lacks: a rebuild
	a := e.begin()
	txExec(t, a, `UPDATE t SET v = 'A' WHERE id = 1`)
	e.exec(`UPDATE t SET v = 'B' WHERE id = 2`)
	e.waitCH("SELECT name FROM system.columns WHERE database = '"+e.db+"' AND table = 't' AND name = 'd'", [][]string{{"d"}})
	e.waitCH("SELECT v, toString(d) FROM "+e.table("t")+" FINAL WHERE id = 2", [][]string{{"B", "7"}})
	if err := a.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop()
	sameRows(t, "row 1", e.chStrings("SELECT v FROM "+e.table("t")+" FINAL WHERE id = 1"), [][]string{{"A"}})
	if n := e.verifyAll(cfg)["public.t"]; n != 10 {
		t.Errorf("t: %d rows, want 10", n)
	}
}

// TestAttachKeepsLaterCommit: ATTACH PARTITION takes only SHARE UPDATE
// EXCLUSIVE on the parent, so a transaction can change the parent's rows
// before it and commit after the copy it triggers (with DDL capture, at the
// DDL message's WAL position); that transaction must win over the copy.
func TestAttachKeepsLaterCommit(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE m (id int, region int, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
		`CREATE TABLE m1 PARTITION OF m FOR VALUES IN (1)`, `CREATE TABLE m2 PARTITION OF m FOR VALUES IN (2)`,
		`INSERT INTO m SELECT g, 1 + g % 2, 'old' FROM generate_series(1, 20) g`)
	if err := replicator.Setup(context.Background(), e.adminURL, "ferry"); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.StandbyInterval = time.Second
	e.mustCatchUp(cfg)
	stop := e.streamInBackground(cfg)
	a := e.begin()
	txExec(t, a, `UPDATE m SET v = 'A' WHERE id = 1`)
	e.exec(`CREATE TABLE m3 (LIKE m)`, `INSERT INTO m3 SELECT g, 3, 'attached' FROM generate_series(1, 5) g`,
		`ALTER TABLE m ATTACH PARTITION m3 FOR VALUES IN (3)`)
	e.waitCH("SELECT toString(count()) FROM "+e.table("m")+" FINAL WHERE region = 3", [][]string{{"5"}})
	if err := a.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop()
	sameRows(t, "row 1", e.chStrings("SELECT v FROM "+e.table("m")+" FINAL WHERE id = 1 AND region = 2"), [][]string{{"A"}})
	if n := e.verifyAll(cfg)["public.m"]; n != 25 {
		t.Errorf("m: %d rows, want 25", n)
	}
}

// TestCopyMissingKeepsLaterCommit: a table copied again at a restart while
// a transaction that changed it before the resume position is still open;
// that transaction commits after the copy and must win over it.
func TestCopyMissingKeepsLaterCommit(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY, v text)`, `INSERT INTO t SELECT g, 'old' FROM generate_series(1, 10) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	a := e.begin()
	txExec(t, a, `UPDATE t SET v = 'A' WHERE id = 1`)
	e.exec(`UPDATE t SET v = 'B' WHERE id = 2`)
	e.mustCatchUp(cfg) // confirms a position past A's change
	if err := e.ch.Exec(context.Background(), "DROP TABLE "+e.table("t")); err != nil {
		t.Fatal(err)
	}
	e.mustCatchUp(cfg) // copies t again, A still open
	if err := a.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.mustCatchUp(cfg)
	sameRows(t, "row 1", e.chStrings("SELECT v FROM "+e.table("t")+" FINAL WHERE id = 1"), [][]string{{"A"}})
	if n := e.verifyAll(cfg)["public.t"]; n != 10 {
		t.Errorf("t: %d rows, want 10", n)
	}
}

// TestAppendOnlyCopyMissingOnce: rows inserted while ferry was stopped are
// both in the copy of a table ClickHouse lost and in the stream replayed
// from the resume position; each must be there once.
func TestAppendOnlyCopyMissingOnce(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE ev (n int, v text)`, `INSERT INTO ev VALUES (0, 'seed')`)
	cfg := appendOnlyConfig(e)
	e.mustCatchUp(cfg)
	e.exec(`INSERT INTO ev SELECT g, 'while stopped' FROM generate_series(1, 50) g`)
	if err := e.ch.Exec(context.Background(), "DROP TABLE "+e.table("ev")); err != nil {
		t.Fatal(err)
	}
	e.mustCatchUp(cfg)
	e.exec(`INSERT INTO ev SELECT g, 'after' FROM generate_series(1, 5) g`)
	e.mustCatchUp(cfg)
	if n := e.chFinal("ev"); n != 56 {
		t.Errorf("ClickHouse holds %d rows of ev, PostgreSQL 56", n)
	}
	e.verifyAll(cfg)
}

// TestAppendOnlyRebuildOnce: the transaction whose Relation message
// triggers a rebuild is in the rebuild's copy, and its inserts come in the
// stream too; each row must be there once, also when ferry stops before
// it confirms that transaction and receives it again, and when that
// transaction is streamed in progress (protocol 2, replayed from the spill).
func TestAppendOnlyRebuildOnce(t *testing.T) {
	for _, tc := range []struct{ replayed, streamed bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("replayed=%v,streamed=%v", tc.replayed, tc.streamed), func(t *testing.T) {
			replayed := tc.replayed
			e := newEnv(t) // no ferry setup: the Relation message triggers the rebuild
			if tc.streamed {
				e.pgURL = lowDecodingMemory(t, e.pgURL)
			}
			e.exec(`CREATE TABLE ev (n int, v text)`, `INSERT INTO ev VALUES (0, 'seed')`)
			cfg := appendOnlyConfig(e)
			if tc.streamed {
				cfg.Streaming, cfg.SpillDir = replicator.StreamingOn, t.TempDir()
			}
			e.mustCatchUp(cfg)
			before := e.streamedTxns()
			e.exec(`ALTER TABLE ev ADD COLUMN d int DEFAULT 7`, // the rows hold 7, which ClickHouse lacks: a rebuild
				`INSERT INTO ev SELECT g % 100, 'b' FROM generate_series(1, 5000) g`)
			if replayed {
				err := e.catchUpThrough(cfg, &failAfterSwap{Sink: e.sink()})
				if !errors.Is(err, errAfterSwap) {
					t.Fatalf("run: %v, want it to stop after the swap", err)
				}
			}
			e.mustCatchUp(cfg)
			if streamed := e.streamedTxns() > before; streamed != tc.streamed {
				t.Fatalf("PostgreSQL streamed the transaction in progress: %v, want %v", streamed, tc.streamed)
			}
			e.exec(`INSERT INTO ev SELECT g, 'after' FROM generate_series(1, 5) g`)
			e.mustCatchUp(cfg)
			if n := e.chFinal("ev"); n != 5006 {
				t.Errorf("ClickHouse holds %d rows of ev, PostgreSQL 5006", n)
			}
			e.verifyAll(cfg)
		})
	}
}

var errAfterSwap = errors.New("test: ferry stops after the swap")

// failAfterSwap is the ClickHouse sink, but the table state stored after a
// SwapTable is followed by an error: ferry stops with the rebuild done and
// stored, before it confirms the transaction that triggered it.
type failAfterSwap struct {
	*clickhouse.Sink
	swapped, failed bool
}

func (s *failAfterSwap) SwapTable(ctx context.Context, target, shadow *schema.TableMap) error {
	err := s.Sink.SwapTable(ctx, target, shadow)
	s.swapped = err == nil
	return err
}

func (s *failAfterSwap) SetTableState(ctx context.Context, slot string, oid uint32, state []byte) error {
	if err := s.Sink.SetTableState(ctx, slot, oid, state); err != nil || !s.swapped || s.failed {
		return err
	}
	s.failed = true
	return errAfterSwap
}
