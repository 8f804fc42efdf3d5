package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// scrape returns the value of every unlabelled sample and labelled sample
// (by its full name with labels) of /metrics.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

func (e *opsEnv) statusJSON() status {
	e.t.Helper()
	out, err := e.ferry(e.args("status", "--json")...)
	if err != nil {
		e.t.Fatalf("ferry status --json: %v\n%s", err, out)
	}
	var st status
	// Log lines go to stderr, which CombinedOutput mixes in: the JSON
	// document starts at the first brace.
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &st); err != nil {
		e.t.Fatalf("ferry status --json: %v\n%s", err, out)
	}
	return st
}

// TestMetricsAndStatus streams writes, scrapes /metrics until the lag is
// zero and every change is counted, and reads ferry status during and
// after the run; SIGTERM must stop ferry with exit 0.
func TestMetricsAndStatus(t *testing.T) {
	e := newOpsEnv(t)
	e.exec("CREATE TABLE items (id int PRIMARY KEY, v text)",
		"INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 500) g")
	addr := freeAddr(t)
	stop := e.start(e.args("run", "--metrics-addr", addr, "--heartbeat", "300ms")...)
	testkit.WaitFor(t, 2*time.Minute, "/readyz", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	for i := 0; i < 20; i++ {
		e.exec(fmt.Sprintf("INSERT INTO items SELECT g, 'w' FROM generate_series(%d, %d) g", 1000+i*10, 1009+i*10),
			fmt.Sprintf("UPDATE items SET v = 'u' WHERE id = %d", i+1))
	}
	var m map[string]float64
	testkit.WaitFor(t, 2*time.Minute, "lag 0 with every change counted", func() bool {
		m = scrape(t, addr)
		return m[`ferry_changes_total{op="insert",table="public.items"}`] == 200 &&
			m[`ferry_changes_total{op="update",table="public.items"}`] == 20 &&
			m["ferry_lag_bytes"] == 0 && m["ferry_confirmed_lsn"] > 0
	})
	for _, name := range []string{`ferry_snapshot_rows{table="public.items"}`, `ferry_snapshot_done{table="public.items"}`,
		"ferry_batch_rows_count", "ferry_flush_duration_seconds_count", "ferry_lag_seconds", "ferry_slot_retained_wal_bytes"} {
		if _, ok := m[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if m[`ferry_snapshot_rows{table="public.items"}`] != 500 {
		t.Errorf("ferry_snapshot_rows = %v, want 500", m[`ferry_snapshot_rows{table="public.items"}`])
	}
	testkit.WaitFor(t, 2*time.Minute, "a heartbeat through the stream", func() bool {
		return scrape(t, addr)["ferry_heartbeat_latency_seconds_count"] > 0
	})

	var st status
	testkit.WaitFor(t, 2*time.Minute, "ferry status to show the running ferry's progress", func() bool {
		st = e.statusJSON()
		return st.Active && st.LagSeconds != nil && len(st.CHRows) == 1 && st.CHRows[0].Rows == 700
	})
	if !st.Snapshot.Done || st.ConfirmedLSN == "" || len(st.Tables) != 1 || st.Tables[0].Name != "public.items" {
		t.Errorf("status during the run: %+v", st)
	}

	out, err := stop()
	if err != nil {
		t.Fatalf("ferry run after SIGTERM: %v\n%s", err, out)
	}
	assertNoPassword(t, "ferry run", out)
	// The server notices the walsender's end a moment after ferry exits.
	testkit.WaitFor(t, 2*time.Minute, "the slot to be inactive after ferry exited", func() bool {
		st = e.statusJSON()
		return !st.Active
	})
	if !st.Exists || st.Active || st.CHRows[0].Rows != 700 || st.ProgressUpdated == nil {
		t.Errorf("status after the run: %+v", st)
	}
}

// TestHeartbeatAdvancesIdleSlot: with no table changing, heartbeats still
// go through the slot and its confirmed position moves past where the
// server's WAL was when streaming began.
func TestHeartbeatAdvancesIdleSlot(t *testing.T) {
	e := newOpsEnv(t)
	e.exec("CREATE TABLE quiet (id int PRIMARY KEY)")
	addr := freeAddr(t)
	e.start(e.args("run", "--metrics-addr", addr, "--heartbeat", "200ms")...)
	ctx := context.Background()
	var startLSN string
	testkit.WaitFor(t, 2*time.Minute, "the slot to be streamed from", func() bool {
		var active bool
		err := e.admin.QueryRow(ctx, `SELECT active, pg_current_wal_lsn()::text FROM pg_replication_slots WHERE slot_name = $1`, e.name).Scan(&active, &startLSN)
		return err == nil && active
	})
	testkit.WaitFor(t, 2*time.Minute, "the idle slot's confirmed position to pass "+startLSN, func() bool {
		var passed bool
		err := e.admin.QueryRow(ctx, `SELECT confirmed_flush_lsn > $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, e.name, startLSN).Scan(&passed)
		return err == nil && passed
	})
	testkit.WaitFor(t, 2*time.Minute, "heartbeats to arrive through the stream", func() bool {
		m := scrape(t, addr)
		return m["ferry_heartbeat_latency_seconds_count"] >= 2 && m["ferry_last_heartbeat_timestamp_seconds"] > 0
	})
}

// TestTeardown: without --yes nothing changes and the exit is non-zero;
// with it no slot or publication is left, and --drop-clickhouse drops
// ferry's tables.
func TestTeardown(t *testing.T) {
	e := newOpsEnv(t)
	e.exec("CREATE TABLE keyed (id int PRIMARY KEY)", "CREATE TABLE log (at int)", "INSERT INTO keyed VALUES (1)")
	// Event triggers need a superuser; the test role is not one.
	super, err := url.Parse(e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	super.User = url.User(e.admin.Config().User)
	if out, err := e.ferry("setup", "--pg", super.String()); err != nil {
		t.Fatalf("ferry setup: %v\n%s", err, out)
	}
	if out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "", "--append-only", "public.log")...); err != nil {
		t.Fatalf("ferry run --catch-up: %v\n%s", err, out)
	}
	count := func(q string) int {
		var n int
		if err := e.admin.QueryRow(context.Background(), q, e.name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	slots := `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`
	out, err := e.ferry(e.args("teardown", "--drop-clickhouse")...)
	if err == nil || !strings.Contains(out, "would: drop replication slot "+e.name) || !strings.Contains(out, "would: drop publication ferry_append") {
		t.Errorf("teardown without --yes: err %v\n%s", err, out)
	}
	if count(slots) != 1 {
		t.Fatalf("teardown without --yes dropped the slot")
	}
	out, err = e.ferry("teardown", "--yes", "--drop-clickhouse", "--pg", super.String(), "--ch", e.chURL, "--slot", e.name)
	if err != nil {
		t.Fatalf("teardown --yes: %v\n%s", err, out)
	}
	assertNoPassword(t, "ferry teardown", out)
	var pubCount int
	if err := e.pg.QueryRow(context.Background(), `SELECT count(*) FROM pg_publication`).Scan(&pubCount); err != nil {
		t.Fatal(err)
	}
	if n := count(slots); n != 0 || pubCount != 0 {
		t.Errorf("after teardown: %d slots, %d publications\n%s", n, pubCount, out)
	}
	var triggers, functions int
	if err := e.pg.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'ferry%'),
		(SELECT count(*) FROM pg_proc WHERE proname LIKE 'ferry_ddl%')`).Scan(&triggers, &functions); err != nil {
		t.Fatal(err)
	}
	if triggers != 0 || functions != 0 {
		t.Errorf("after teardown: %d ferry event triggers and %d functions left\n%s", triggers, functions, out)
	}
	for _, tbl := range []string{"keyed", "log", "_ferry_snapshots", "_ferry_progress", "_ferry_tables"} {
		if !strings.Contains(out, "."+tbl) {
			t.Errorf("teardown did not drop ClickHouse table %s:\n%s", tbl, out)
		}
	}
	if out, err := e.ferry(e.args("teardown", "--yes")...); err != nil || !strings.Contains(out, "nothing to tear down") {
		t.Errorf("second teardown: %v\n%s", err, out)
	}
}

// TestPasswordRedacted runs the commands that print connection details,
// successes and failures, with a password in the URL.
func TestPasswordRedacted(t *testing.T) {
	e := newOpsEnv(t)
	e.exec("CREATE TABLE t (id int PRIMARY KEY)", "CREATE TABLE nokey (v int)", "INSERT INTO t VALUES (1)")
	chBad := strings.Replace(e.chURL, "://", "://default:"+testPassword+"@", 1)
	if i := strings.Index(chBad, "@127"); i >= 0 && strings.Count(chBad, "@") > 1 {
		chBad = chBad[:strings.Index(chBad, "@")] + chBad[strings.LastIndex(chBad, "@"):]
	}
	runs := [][]string{
		e.args("run", "--catch-up", "--metrics-addr", "", "--log-level", "debug"),
		e.args("status"),
		e.args("status", "--json"),
		e.args("check"),
		e.args("config", "print"),
		e.args("run", "--catch-up", "--metrics-addr", "", "--tables", "public.missing"),
		{"status", "--pg", e.pgURL, "--ch", chBad, "--slot", e.name},
		{"check", "--pg", strings.Replace(e.pgURL, "/"+e.name, "/no_such_db", 1), "--ch", chBad},
		{"run", "--catch-up", "--metrics-addr", "", "--log-format", "json", "--pg", strings.Replace(e.pgURL, "127.0.0.1", "127.0.0.1:1", 1), "--ch", e.chURL},
		{"teardown", "--pg", withPort(t, e.pgURL, "1"), "--ch", e.chURL},
	}
	if pgTLS, chTLS := os.Getenv("FERRY_PG_TLS_URL"), os.Getenv("FERRY_CH_TLS_URL"); pgTLS != "" && chTLS != "" {
		// TLS failures: a CA that did not sign the servers' certificates.
		ca := testkit.WriteOtherCA(t)
		u, err := url.Parse(e.pgURL)
		if err != nil {
			t.Fatal(err)
		}
		u.RawQuery = "sslmode=verify-full&sslrootcert=" + url.QueryEscape(ca)
		chTLSBad := strings.Replace(chTLS, "://default@", "://default:"+testPassword+"@", 1)
		runs = append(runs,
			[]string{"check", "--pg", u.String(), "--ch", chTLSBad, "--ch-ca-file", ca},
			[]string{"run", "--catch-up", "--metrics-addr", "", "--pg", u.String(), "--ch", chTLSBad, "--ch-ca-file", ca},
			[]string{"run", "--catch-up", "--metrics-addr", "", "--pg", e.pgURL, "--ch", chTLSBad, "--ch-ca-file", ca})
	}
	for _, args := range runs {
		out, err := e.ferry(args...)
		t.Logf("ferry %s: %v", args[0], err)
		assertNoPassword(t, "ferry "+strings.Join(args[:1], " "), out)
		if strings.Contains(strings.Join(args, " "), "--ch-ca-file") && (err == nil || !strings.Contains(out, "not signed by a CA ferry trusts")) {
			t.Errorf("ferry %s with a wrong CA: err %v, want it to say the CA does not sign the certificate:\n%s", args[0], err, out)
		}
	}
}

func assertNoPassword(t *testing.T, what, out string) {
	t.Helper()
	if strings.Contains(out, testPassword) {
		t.Errorf("%s printed the password:\n%s", what, out)
	}
}

func withPort(t *testing.T, rawURL, port string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = u.Hostname() + ":" + port
	return u.String()
}
