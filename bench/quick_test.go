package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// privateDatabase creates a database of the test's own, dropped at the
// end, so that runs beside each other (two make test on one stack) neither
// see each other as busy nor drop each other's schema. It returns its URL
// and its name, also a slot name that no one else uses.
func privateDatabase(t *testing.T, base string) (string, string) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "ferry_bq_" + hex.EncodeToString(b)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", name)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Log(err)
		}
		admin.Close(ctx)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String(), name
}

// TestQuickRun runs the --quick preset against the local stack with the
// replicator reading the same WAL, and checks that results.json holds every
// field the issue names for every strategy and that every sanity check
// passed.
func TestQuickRun(t *testing.T) {
	url := os.Getenv("FERRY_PG_URL")
	if url == "" {
		t.Skip("FERRY_PG_URL is not set: start the local stack (make stack-up; . .stack/env) to run the bench integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	db, name := privateDatabase(t, url)
	start := time.Now()
	var progress []string
	// Keep: the marker table is looked at below; the database goes at the end.
	cfg := Config{ConnString: db, Slot: name, WithCDC: true, KeepDisturbed: true, Keep: true,
		Progress: func(_, _ int, what string) { progress = append(progress, what) }}.Quick()
	res, err := Run(ctx, cfg)
	if errors.Is(err, ErrBusy) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("quick run took %s", time.Since(start).Round(time.Millisecond))
	checkProgress(t, progress)
	checkMarkerAutovacuumOff(ctx, t, db)
	// No pg_waldump given: the figures are pg_stat_wal's, and say so.
	if res.WALSource != WALSourceStatWAL || res.WALSourceNote == "" {
		t.Errorf("WAL source %q (%q), want %q with the reason", res.WALSource, res.WALSourceNote, WALSourceStatWAL)
	}
	for _, e := range res.Runs {
		for _, r := range e.PerRun {
			if r.WALSource != WALSourceStatWAL {
				t.Errorf("%s %s run %d: WAL source %q", e.Strategy, e.Workload, r.Run, r.WALSource)
			}
		}
	}
	dir := t.TempDir()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "throughput.svg", "wal.svg", "lag.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"machine", "settings", "runs"} {
		if doc[k] == nil {
			t.Errorf("results.json has no %q", k)
		}
	}
	runs, _ := doc["runs"].([]any)
	seen := map[string]int{}
	for _, r := range runs {
		run := r.(map[string]any)
		name := run["strategy"].(string) + "/" + run["workload"].(string)
		seen[run["strategy"].(string)]++
		checkFields(t, name, run)
	}
	for _, s := range res.Params.Strategies {
		if seen[s] != len(Workloads) {
			t.Errorf("strategy %s has %d entries, want one per workload (%d)", s, seen[s], len(Workloads))
		}
	}
	if len(res.Params.Strategies) < len(Strategies)-1 {
		t.Errorf("ran %v: every strategy but uuidv7-native (PostgreSQL 18) should run", res.Params.Strategies)
	}
}

// checkMarkerAutovacuumOff checks that the CDC marker table, updated by
// every run, has autovacuum off like the bench tables.
func checkMarkerAutovacuumOff(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var opts []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, markerTable).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(opts, "autovacuum_enabled=off") {
		t.Errorf("%s: reloptions %v, want autovacuum_enabled=off", markerTable, opts)
	}
}

// checkProgress checks that the progress line names the timed load while
// it runs: after a table's seeding, the line announces the load before the
// run's result, and every run is announced so.
func checkProgress(t *testing.T, lines []string) {
	t.Helper()
	var seeding string
	loads := 0
	for _, l := range lines {
		switch {
		case strings.Contains(l, ": seeding "):
			seeding = l
		case strings.HasSuffix(l, " load"):
			seeding = ""
			loads++
		case strings.Contains(l, " tps") && seeding != "":
			t.Errorf("progress went from %q to %q without announcing the load", seeding, l)
			seeding = ""
		}
	}
	if want := len(Strategies) - 1; loads < want*len(Workloads) {
		t.Errorf("%d loads announced, want one per run (at least %d): %q", loads, want*len(Workloads), lines)
	}
}

func checkFields(t *testing.T, name string, run map[string]any) {
	t.Helper()
	for _, k := range []string{"strategy", "workload", "clients", "n", "tps", "latency_ms", "wal_bytes_per_row",
		"fpi_per_row", "pages_written_per_row", "heap_bytes", "index_bytes", "bytes_per_row", "avg_leaf_density", "wait_events",
		"hot_blocks", "lag", "spread", "sanity"} {
		if _, ok := run[k]; !ok {
			t.Errorf("%s: no field %q", name, k)
		}
	}
	sub := map[string][]string{"latency_ms": {"p50", "p95", "p99"}, "lag": {"peak_bytes", "peak_seconds", "catchup_seconds"},
		"spread": {"min", "max"}, "sanity": {"passed", "checks"}}
	for k, fields := range sub {
		m, _ := run[k].(map[string]any)
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("%s: no field %s.%s", name, k, f)
			}
		}
	}
	if tps, _ := run["tps"].(float64); tps <= 0 {
		t.Errorf("%s: tps %v", name, run["tps"])
	}
	if d, _ := run["avg_leaf_density"].(float64); d <= 0 || d > 100 {
		t.Errorf("%s: avg_leaf_density %v", name, run["avg_leaf_density"])
	}
	if run["fpi_per_row"] == nil {
		t.Errorf("%s: fpi_per_row is null on a server with pg_stat_wal", name)
	}
	sanity := run["sanity"].(map[string]any)
	if sanity["passed"] != true {
		t.Errorf("%s: sanity failed: %v", name, sanity["checks"])
	}
	for _, hb := range run["hot_blocks"].([]any) {
		for _, f := range []string{"block", "pins", "max_block"} {
			if _, ok := hb.(map[string]any)[f]; !ok {
				t.Errorf("%s: hot block without %s", name, f)
			}
		}
	}
}
