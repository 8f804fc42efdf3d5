package chaostest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// scenario is one fault scenario: a PostgreSQL database, a slot, a
// publication and a ClickHouse database of its own, a writer, and the
// ferry processes it starts.
type scenario struct {
	t    *testing.T
	s    *suite
	m    mode
	name string // database, slot and publication name
	w    *writer
	log  *testkit.Buffer // every ferry process's output
	runs []*ferryProc
	pg   *pgx.Conn // direct, for positions and counts
}

func newScenario(t *testing.T, name string) *scenario {
	s := getSuite(t)
	sc := &scenario{t: t, s: s, m: currentMode(), name: "chaos_" + name, log: &testkit.Buffer{}}
	ctx := context.Background()
	if err := s.pg.exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+sc.name+" WITH (FORCE)", "CREATE DATABASE "+sc.name); err != nil {
		t.Fatal(err)
	}
	if err := s.pg.exec(ctx, sc.name, append(schemaSQL, seedSQL(sc.m.seedRows)...)...); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.pg.url("", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	sc.pg = conn
	sc.w = newWriter(s.pg.url("", sc.name), sc.m, sc.m.seedRows, uint64(time.Now().UnixNano()))
	t.Cleanup(sc.cleanup)
	return sc
}

func (sc *scenario) cleanup() {
	for _, f := range sc.runs {
		if f.running() {
			f.kill()
		}
	}
	if sc.w.done != nil {
		select {
		case <-sc.w.done:
		default:
			_ = sc.w.stop()
		}
	}
	if sc.t.Failed() || os.Getenv("CHAOS_LOG") != "" {
		sc.t.Logf("ferry's output (last part):\n%s", tail(sc.log.String(), 8000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = sc.pg.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", sc.name)
	_, _ = sc.pg.Exec(ctx, "DROP DATABASE IF EXISTS "+sc.name+" WITH (FORCE)")
	sc.pg.Close(ctx)
	if conn, err := sc.s.ch.open(""); err == nil {
		_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+sc.name)
		conn.Close()
	}
}

// args are ferry's connection and table flags, through the proxies.
func (sc *scenario) args(cmd string, extra ...string) []string {
	a := []string{cmd, "--pg", sc.s.pg.url(sc.s.pgProxy.Addr(), sc.name), "--ch", sc.s.ch.url(sc.s.chProxy.Addr()),
		"--ch-database", sc.name, "--slot", sc.name, "--publication", sc.name, "--tables", strings.Join(tables, ",")}
	if cmd == "run" {
		a = append(a, "--metrics-addr=", "--heartbeat", "2s")
	}
	return append(a, extra...)
}

// start runs `ferry run` in the background.
func (sc *scenario) start(extra ...string) *ferryProc {
	sc.t.Helper()
	fmt.Fprintf(sc.log, "--- ferry run #%d at %s\n", len(sc.runs)+1, time.Now().Format("15:04:05.000"))
	f, err := startFerry(sc.s.bin, sc.log, sc.args("run", extra...)...)
	if err != nil {
		sc.t.Fatal(err)
	}
	sc.runs = append(sc.runs, f)
	return f
}

// peakRSS is the highest resident set size of any ferry run so far.
func (sc *scenario) peakRSS() int64 {
	var p int64
	for _, f := range sc.runs {
		p = max(p, f.peakRSS())
	}
	return p
}

// walLSN is PostgreSQL's current WAL position, as text.
func (sc *scenario) walLSN() string {
	sc.t.Helper()
	var lsn string
	if err := sc.pgQuery(`SELECT pg_current_wal_lsn()::text`, &lsn); err != nil {
		sc.t.Fatal(err)
	}
	return lsn
}

// confirmed is the slot's confirmed_flush_lsn, "" while there is no slot.
func (sc *scenario) confirmed() string {
	var lsn *string
	err := sc.pgQuery(`SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, &lsn, sc.name)
	if err != nil || lsn == nil {
		return ""
	}
	return *lsn
}

// pgQuery runs a one-row query on the postgres database, reconnecting once
// when a restart took the connection.
func (sc *scenario) pgQuery(q string, dest any, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := sc.pg.QueryRow(ctx, q, args...).Scan(dest)
	if err == nil || !isConnLoss(err) {
		return err
	}
	conn, cerr := pgx.Connect(ctx, sc.s.pg.url("", "postgres"))
	if cerr != nil {
		return fmt.Errorf("%w (reconnect: %v)", err, cerr)
	}
	sc.pg.Close(ctx)
	sc.pg = conn
	return sc.pg.QueryRow(ctx, q, args...).Scan(dest)
}

// waitConfirmed waits until the slot confirms lsn, that is until
// ClickHouse holds every transaction committed before it, and returns how
// long that took. f, when not nil, must keep running meanwhile.
func (sc *scenario) waitConfirmed(lsn string, f *ferryProc, timeout time.Duration) time.Duration {
	sc.t.Helper()
	start := time.Now()
	for {
		var ok bool
		err := sc.pgQuery(`SELECT coalesce(confirmed_flush_lsn >= $2::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = $1`, &ok, sc.name, lsn)
		if err == nil && ok {
			return time.Since(start)
		}
		if f != nil && !f.running() {
			sc.t.Fatalf("ferry exited (%v) before confirming %s", f.err, lsn)
		}
		if time.Since(start) > timeout {
			sc.t.Fatalf("the slot did not confirm %s within %s (confirmed: %s, err %v)", lsn, timeout, sc.confirmed(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// recover measures, from now (a fault's end), how long ferry takes to
// confirm the WAL written up to now.
func (sc *scenario) recover(f *ferryProc) time.Duration {
	sc.t.Helper()
	return sc.waitConfirmed(sc.walLSN(), f, 5*time.Minute)
}

// settle stops the writer and ferry, runs `ferry run --catch-up`, then
// `ferry verify`, and counts the rows lost and doubled.
func (sc *scenario) settle(f *ferryProc) tally {
	sc.t.Helper()
	if err := sc.w.stop(); err != nil {
		sc.t.Fatal(err)
	}
	if f != nil && f.running() {
		if err := f.stop(90 * time.Second); err != nil {
			sc.t.Errorf("ferry after SIGTERM: %v (want exit 0)", err)
		}
	}
	return sc.check()
}

// check catches up and compares, the writer and ferry stopped.
func (sc *scenario) check() tally {
	sc.t.Helper()
	out, err := runFerry(sc.s.bin, 5*time.Minute, sc.args("run", "--catch-up")...)
	if err != nil {
		sc.t.Fatalf("ferry run --catch-up: %v\n%s", err, tail(out, 4000))
	}
	return sc.compare()
}

// compare runs ferry verify and counts the rows lost and doubled; the
// source must be quiet and ClickHouse caught up.
func (sc *scenario) compare() tally {
	sc.t.Helper()
	tl := sc.count()
	out, err := runFerry(sc.s.bin, 5*time.Minute, sc.args("verify")...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("all %d tables match", len(tables))) {
		sc.t.Errorf("ferry verify: %v\n%s", err, tail(out, 4000))
	}
	if tl.lost != 0 || tl.doubled != 0 {
		sc.t.Errorf("%s: %d rows lost, %d doubled (%s)", sc.name, tl.lost, tl.doubled, tl.detail)
	}
	return tl
}

// written is how many rows were written: the seed and the writer's.
func (sc *scenario) written() int64 {
	return int64(sc.m.seedRows+max(sc.m.seedRows/100, 50)+100) + sc.w.rows.Load()
}
