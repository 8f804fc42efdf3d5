package replicator_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// bigTxRows is the size of the large transaction: FERRY_BIG_TX rows
// (make chaos sets 10,000,000), else 1,000,000.
func bigTxRows(t *testing.T) int {
	n := 1_000_000
	if v := os.Getenv("FERRY_BIG_TX"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("FERRY_BIG_TX=%q: want a positive number of rows", v)
		}
	}
	return n
}

// rssLimitMB is the peak RSS ferry must stay under while it replicates one
// large transaction or one 50 MB value. The documented bound is 256 MB;
// the assertion allows twice that, as a guard against unbounded growth
// rather than a measurement (which the test logs).
const rssLimitMB = 512

// TestLargeTransaction writes one transaction of bigTxRows rows while
// ferry run (a subprocess, so its peak RSS is its own) streams, with and
// without protocol 2 streaming, and checks that ClickHouse holds exactly
// PostgreSQL's rows. It logs ferry's peak RSS (VmHWM) and how long after
// the commit the last row was in ClickHouse.
func TestLargeTransaction(t *testing.T) {
	n := bigTxRows(t)
	bin := buildFerry(t)
	for _, mode := range []string{"off", "on"} {
		t.Run("streaming="+mode, func(t *testing.T) {
			e := newEnv(t)
			e.exec(`CREATE TABLE big (id bigint PRIMARY KEY, n int NOT NULL, s text NOT NULL, at timestamptz NOT NULL)`,
				`INSERT INTO big VALUES (0, 0, 'seed', now())`)
			p := startMeasured(t, bin, "run", "--pg", e.pgURL, "--ch", e.chURL, "--slot", e.slot,
				"--streaming", mode, "--log-level", "warn", "--metrics-addr", "")
			p.waitFor("the initial copy", func() bool { return e.chCount("big") == 1 })
			began := time.Now()
			e.exec(fmt.Sprintf(`INSERT INTO big SELECT g, g %% 1000, md5(g::text), now() FROM generate_series(1, %d) g`, n))
			committed := time.Now()
			p.waitFor("the large transaction", func() bool { return e.chCount("big") >= n+1 })
			stored := time.Now()
			rss := p.peakRSSMB()
			p.stop()
			cpu := p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
			slot := e.pgStrings(`SELECT pg_size_pretty(spill_bytes), pg_size_pretty(stream_bytes) FROM pg_stat_replication_slots WHERE slot_name = '` + e.slot + `'`)
			counts := e.verifyAll(e.config())
			if counts["public.big"] != uint64(n+1) {
				t.Errorf("big: %d rows in PostgreSQL, want %d", counts["public.big"], n+1)
			}
			t.Logf("streaming=%s: %d rows in one transaction: peak RSS %d MB, ferry CPU %s; insert took %s, last row in ClickHouse %s after the commit; the walsender spilled %s to its disk and streamed %s",
				mode, n, rss, cpu.Round(10*time.Millisecond), committed.Sub(began).Round(time.Millisecond), stored.Sub(committed).Round(time.Millisecond), slot[0][0], slot[0][1])
			if rss > rssLimitMB {
				t.Errorf("peak RSS %d MB, over %d MB", rss, rssLimitMB)
			}
		})
	}
}

// chCount is the number of rows, versions not collapsed, of a ClickHouse
// table; 0 while it does not exist.
func (e *env) chCount(table string) int {
	e.t.Helper()
	if !e.chHasTable(table) {
		return 0
	}
	n, _ := strconv.Atoi(e.chStrings("SELECT toString(count()) FROM " + e.table(table))[0][0])
	return n
}

// measured is ferry running as a subprocess whose memory the test reads.
type measured struct {
	t      *testing.T
	cmd    *exec.Cmd
	out    *testkit.Buffer
	exited chan struct{} // closed once the process has exited
	err    error         // how it exited, once exited is closed
}

func startMeasured(t *testing.T, bin string, args ...string) *measured {
	t.Helper()
	p := &measured{t: t, cmd: exec.Command(bin, args...), out: &testkit.Buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	return p
}

// waitFor polls cond for up to 10 minutes, failing if ferry exits first.
func (p *measured) waitFor(what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s; ferry said:\n%s", what, p.out.String())
		}
		select {
		case <-p.exited:
			p.t.Fatalf("ferry exited (%v) while the test waited for %s:\n%s", p.err, what, p.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// peakRSSMB is the process's peak resident set (VmHWM) in MB.
func (p *measured) peakRSSMB() int {
	p.t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		p.t.Fatalf("read ferry's memory: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				p.t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb / 1024
		}
	}
	p.t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// stop ends ferry with SIGTERM, which flushes and confirms, and fails the
// test unless it exits 0.
func (p *measured) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			p.t.Fatalf("ferry exited with %v after SIGTERM:\n%s", p.err, p.out.String())
		}
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		p.t.Fatalf("ferry did not stop within a minute of SIGTERM:\n%s", p.out.String())
	}
}

// kill ends ferry with SIGKILL.
func (p *measured) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// wait waits for ferry to exit on its own and fails the test unless it
// exits 0.
func (p *measured) wait() {
	p.t.Helper()
	<-p.exited
	if p.err != nil {
		p.t.Fatalf("ferry exited with %v:\n%s", p.err, p.out.String())
	}
}

// TestManyTables replicates 500 tables of one publication: copied, then
// streamed by one transaction that writes to all of them.
func TestManyTables(t *testing.T) {
	const tables = 500
	e := newEnv(t)
	e.exec(fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP
		EXECUTE format('CREATE TABLE t%%s (id int PRIMARY KEY, v text NOT NULL)', i);
		EXECUTE format('INSERT INTO t%%s SELECT g, md5(g::text) FROM generate_series(1, 20) g', i);
	END LOOP; END $$`, tables))
	cfg := e.config()
	start := time.Now()
	e.mustCatchUp(cfg)
	copied := time.Since(start)
	e.exec(fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP
		EXECUTE format('INSERT INTO t%%s SELECT g, ''new'' FROM generate_series(21, 30) g', i);
		EXECUTE format('UPDATE t%%s SET v = ''changed'' WHERE id = 1', i);
		EXECUTE format('DELETE FROM t%%s WHERE id = 2', i);
	END LOOP; END $$`, tables))
	start = time.Now()
	e.mustCatchUp(cfg)
	streamed := time.Since(start)
	counts := e.verifyAll(cfg)
	if len(counts) != tables {
		t.Errorf("%d tables replicated, want %d", len(counts), tables)
	}
	for name, n := range counts {
		if n != 29 {
			t.Errorf("%s: %d rows, want 29", name, n)
		}
	}
	t.Logf("%d tables: initial copy %s, one transaction over all of them %s", tables, copied.Round(time.Millisecond), streamed.Round(time.Millisecond))
}

// wideTypes are the column types of TestWideTable, in turn, with an
// expression of g for a value of each; small ones, since a row of 1,000
// columns must fit in PostgreSQL's 8 kB page.
var wideTypes = []struct{ typ, expr string }{
	{"int", "g * %d"},
	{"smallint", "((g + %d) %% 30000)::smallint"},
	{"text", "'t' || (g + %d) %% 100"},
	{"numeric(8,2)", "((g * %d) %% 100000) / 7.0"},
	{"boolean", "(g + %d) %% 2 = 0"},
	{"date", "date '2020-01-01' + (g + %d) %% 1000"},
	{"real", "g / (%d + 0.5)"},
	{"timestamptz", "timestamptz '2024-01-01' + (g + %d) * interval '1 minute'"},
	{"jsonb", "jsonb_build_array(g, %d)"},
	{"varchar(12)", "'v' || (g * %d) %% 1000"},
}

// TestWideTable replicates a table of 1,000 columns of mixed types: copied,
// then inserts, updates of a few columns, and deletes streamed. The stream
// lands in many small parts that ClickHouse does not merge, as on a loaded
// machine whose merges lag: verify's FINAL scan then needed a read buffer
// per column and part, 2.2 MB each, and with 20 parts went over the 10 GB
// that ClickHouse allows a query.
func TestWideTable(t *testing.T) {
	const cols = 1000
	e := newEnv(t)
	var defs, exprs []string
	for i := 1; i < cols; i++ {
		w := wideTypes[i%len(wideTypes)]
		defs = append(defs, fmt.Sprintf("c%d %s", i, w.typ))
		exprs = append(exprs, fmt.Sprintf(w.expr, i))
	}
	e.exec(`CREATE TABLE wide (id int PRIMARY KEY, `+strings.Join(defs, ", ")+`)`,
		`INSERT INTO wide SELECT g, `+strings.Join(exprs, ", ")+` FROM generate_series(1, 200) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	if err := e.ch.Exec(context.Background(), "SYSTEM STOP MERGES "+e.table("wide")); err != nil {
		t.Fatal(err)
	}
	// Small parts are compact (one file for all columns) on ClickHouse
	// 20.3 and later, but a table's large parts are wide, one file per
	// column: make them all wide, as 18.16's are.
	wideParts := e.ch.Exec(context.Background(), "ALTER TABLE "+e.table("wide")+" MODIFY SETTING min_bytes_for_wide_part = 0") == nil
	for from := 201; from <= 1200; from += 50 {
		e.exec(`INSERT INTO wide SELECT g, ` + strings.Join(exprs, ", ") + fmt.Sprintf(` FROM generate_series(%d, %d) g`, from, from+49))
	}
	e.exec(`UPDATE wide SET c2 = 'changed', c999 = NULL, c500 = c500 + 1 WHERE id % 10 = 0`,
		`DELETE FROM wide WHERE id % 97 = 0`)
	cfg.Batch.MaxRows = 50 // a part per transaction
	e.mustCatchUp(cfg)
	parts := e.chStrings("SELECT toString(count()) FROM system.parts WHERE active AND database = '" + e.db + "' AND table = 'wide'")
	if n, _ := strconv.Atoi(parts[0][0]); n < 20 {
		t.Fatalf("the wide table has %d active parts, want 20 or more for verify to read at once", n)
	}
	if wideParts {
		wide := e.chStrings("SELECT toString(count()) FROM system.parts WHERE active AND database = '" + e.db + "' AND table = 'wide' AND part_type = 'Wide'")
		if n, _ := strconv.Atoi(wide[0][0]); n < 20 {
			t.Fatalf("the wide table has %d wide parts, want 20 or more", n)
		}
	}
	counts := e.verifyAll(cfg)
	if want := uint64(1200 - 1200/97); counts["public.wide"] != want {
		t.Errorf("wide: %d rows, want %d", counts["public.wide"], want)
	}
	if got := e.chStrings("SELECT toString(count()) FROM system.columns WHERE database = '" + e.db + "' AND table = 'wide'"); got[0][0] != fmt.Sprint(cols+3) {
		t.Errorf("the ClickHouse table has %s columns, want %d", got[0][0], cols+3)
	}
}

// hugeJSON is a jsonb value of about 50 MB, and hugeText a text of 51 MB.
const (
	hugeJSON = `(SELECT jsonb_agg(jsonb_build_object('i', g, 's', md5(g::text))) FROM generate_series(1, 1000000) g)`
	hugeText = `(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 1600000) g)`
)

// TestHugeValues replicates rows holding a 50 MB jsonb and a 51 MB text:
// one copied, one inserted while streaming, and an update of another
// column that leaves both TOASTed values unchanged. It logs ferry's peak
// RSS.
func TestHugeValues(t *testing.T) {
	e := newEnv(t)
	bin := buildFerry(t)
	e.exec(`CREATE TABLE blobs (id int PRIMARY KEY, n int NOT NULL, j jsonb, t text)`,
		`INSERT INTO blobs VALUES (1, 0, `+hugeJSON+`, `+hugeText+`)`)
	p := startMeasured(t, bin, "run", "--pg", e.pgURL, "--ch", e.chURL, "--slot", e.slot, "--log-level", "warn", "--metrics-addr", "")
	p.waitFor("the initial copy", func() bool { return e.chCount("blobs") == 1 })
	copyRSS := p.peakRSSMB()
	e.exec(`INSERT INTO blobs VALUES (2, 0, `+hugeJSON+`, `+hugeText+`)`, `UPDATE blobs SET n = 1 WHERE id = 1`)
	p.waitFor("the streamed rows", func() bool {
		return e.chCount("blobs") >= 3 && len(e.chStrings("SELECT toString(n) FROM "+e.table("blobs")+" FINAL WHERE id = 1 AND n = 1")) == 1
	})
	rss := p.peakRSSMB()
	p.stop()
	e.verifyAll(e.config())
	sizes := e.pgStrings(`SELECT octet_length(j::text), octet_length(t) FROM blobs WHERE id = 2`)
	sameRows(t, "ClickHouse value sizes", e.chStrings("SELECT toString(length(j)), toString(length(t)) FROM "+e.table("blobs")+" FINAL WHERE id = 2"), sizes)
	t.Logf("rows of a %s-byte jsonb and a %s-byte text: peak RSS %d MB after the initial copy, %d MB after streaming", sizes[0][0], sizes[0][1], copyRSS, rss)
	if rss > 1024 {
		t.Errorf("peak RSS %d MB, over 1 GB", rss)
	}
}
