package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// testWALDump finds pg_waldump the way cmd/ferry does, or skips.
func testWALDump(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "pg_waldump")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("pg_waldump"); err == nil {
		return p
	}
	t.Skip("no pg_waldump (pg_config --bindir or PATH)")
	return ""
}

// walDumpTotals is the test's own reading of pg_waldump --stats: records,
// record bytes and FPI bytes of the Total line, and the FPW block
// references --fullpage prints.
// The start's segment file is named, as the benchmark does (see
// walReader.args): pg_waldump would otherwise take the segment size from
// the first file of the directory, maybe one created ahead and all zeros.
func walDumpTotals(t *testing.T, conn *pgx.Conn, bin, dir, start, end string) (records, recBytes, fpiBytes, fpw int64) {
	t.Helper()
	var seg, last string
	if err := conn.QueryRow(context.Background(), `SELECT pg_walfile_name($1::pg_lsn + 1), pg_walfile_name($2::pg_lsn)`, start, end).Scan(&seg, &last); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-p", dir, "-s", start, "-e", end, "-z", seg, last).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_waldump --stats %s..%s: %v: %s", start, end, err, out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Total ") {
			line = l
		}
	}
	f := strings.Fields(regexp.MustCompile(`\[[^]]*\]`).ReplaceAllString(line, ""))
	if len(f) != 5 {
		t.Fatalf("pg_waldump --stats Total line %q", line)
	}
	records, _ = strconv.ParseInt(f[1], 10, 64)
	fpiBytes, _ = strconv.ParseInt(f[3], 10, 64)
	recBytes, _ = strconv.ParseInt(f[4], 10, 64)
	full, err := exec.Command(bin, "-p", dir, "-s", start, "-e", end, "-w", seg, last).Output()
	if err != nil {
		t.Fatalf("pg_waldump --fullpage: %v", err)
	}
	return records, recBytes, fpiBytes, int64(bytes.Count(full, []byte(" FPW")))
}

func near(a, b int64) bool { return within(a, b, 0.01) }

// TestWindowWALMatchesWALDump runs a small benchmark while a physical slot
// of the test's own keeps all of its WAL, then reads every run's window
// with pg_waldump --stats and --fullpage and requires the run's WAL bytes
// and full-page images to match within 1%. pg_stat_wal's counts
// (FERRY_BENCH_WAL_SOURCE=pg_stat_wal) fail it. It also checks that runs
// are replicates: each on a fresh table of seed rows plus its own.
func TestWindowWALMatchesWALDump(t *testing.T) {
	url := os.Getenv("FERRY_PG_URL")
	if url == "" {
		t.Skip("FERRY_PG_URL is not set: start the local stack to run the bench integration tests")
	}
	bin := testWALDump(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dbURL, name := privateDatabase(t, url)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dataDir string
	if err := conn.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, "pg_wal")
	if _, err := os.ReadDir(dir); err != nil {
		t.Skipf("the server's WAL is not readable here: %v", err)
	}
	// Temporary: the server drops it when this connection ends.
	if _, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true, true)`, name+"_test"); err != nil {
		t.Fatal(err)
	}
	const seedRows = 20_000
	cfg := Config{ConnString: dbURL, Slot: name, Strategies: []string{"bigserial", "uuidv4"}, Workloads: []string{"insert", "update-hot"},
		Clients: []int{2}, Duration: time.Second, SeedRows: seedRows, Runs: 2, WALDump: bin, SelfCheck: true,
		// The shared stack's other sessions write into the windows too; the
		// figures are compared all the same.
		KeepDisturbed: true, Keep: true}
	if src := os.Getenv("FERRY_BENCH_WAL_SOURCE"); src != "" {
		cfg.WALSource, cfg.SelfCheck = src, false
	}
	res, err := Run(ctx, cfg)
	if errors.Is(err, ErrBusy) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Strategies {
		st, _ := strategyByName(s)
		var opts []string
		if err := conn.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, st.Qualified()).Scan(&opts); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(opts, "autovacuum_enabled=off") {
			t.Errorf("%s: reloptions %v, want autovacuum_enabled=off", st.Qualified(), opts)
		}
	}
	for _, e := range res.Runs {
		for _, r := range e.PerRun {
			what := e.Strategy + " " + e.Workload + " run " + strconv.Itoa(r.Run)
			recs, recBytes, fpiBytes, fpw := walDumpTotals(t, conn, bin, dir, r.WALStart, r.WALEnd)
			var fpi int64 = -1
			if r.FPI != nil {
				fpi = *r.FPI
			}
			t.Logf("%s: window %s..%s, %d records; WAL record bytes %d (pg_waldump %d), LSN distance %d; FPIs %d (pg_waldump %d), FPI bytes %d (%d); source %s",
				what, r.WALStart, r.WALEnd, recs, r.WALRecordBytes, recBytes, r.WALBytes, fpi, fpw, r.FPIBytes, fpiBytes, r.WALSource)
			if !near(r.WALRecordBytes, recBytes) || !near(fpi, fpw) || !near(r.FPIBytes, fpiBytes) {
				t.Errorf("%s: the run's WAL figures differ from pg_waldump's by more than 1%%", what)
			}
			if r.WALBytes < recBytes || r.WALStart >= r.WALEnd && r.WALBytes > 0 {
				t.Errorf("%s: LSN distance %d is smaller than the %d record bytes in it", what, r.WALBytes, recBytes)
			}
			want := int64(seedRows)
			if strings.HasPrefix(e.Workload, "insert") {
				want += r.Rows
			}
			if r.TableRows != want {
				t.Errorf("%s: table holds %d rows, want %d: seed rows plus this run's own", what, r.TableRows, want)
			}
		}
		for _, c := range e.Sanity.Checks {
			if c.Name == selfCheckName && !c.Passed {
				t.Errorf("%s %s: self-check failed: %s", e.Strategy, e.Workload, c.Detail)
			}
		}
	}
}

// TestWALPositionIsInsertPosition commits with synchronous_commit off and
// requires the benchmark's WAL position, read right after, to be past
// the commit: the write position (pg_current_wal_lsn) trails it.
func TestWALPositionIsInsertPosition(t *testing.T) {
	url := os.Getenv("FERRY_PG_URL")
	if url == "" {
		t.Skip("FERRY_PG_URL is not set: start the local stack to run the bench integration tests")
	}
	ctx := context.Background()
	dbURL, _ := privateDatabase(t, url)
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	for _, q := range []string{"SET synchronous_commit = off", "CREATE TABLE pos (id int, pad text)"} {
		if _, err := w.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	behind := 0
	for i := 0; i < 50; i++ {
		if _, err := w.Exec(ctx, "INSERT INTO pos SELECT g, repeat('x', 200) FROM generate_series(1, 20) g"); err != nil {
			t.Fatal(err)
		}
		var committed int64
		if err := w.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&committed); err != nil {
			t.Fatal(err)
		}
		pos, _, err := walPosition(ctx, db, false)
		if err != nil {
			t.Fatal(err)
		}
		if pos < committed {
			behind++
		}
	}
	if behind > 0 {
		t.Errorf("the WAL position read after a commit was behind the commit %d times in 50", behind)
	}
}

// TestSettleCatalogsLeavesAutovacuumNothing churns the catalogs the way
// many runs' DDL does until autovacuum has work on them, then requires
// settleCatalogs to leave every catalog of benchCatalogs below autovacuum's
// thresholds, so that no catalog vacuum or analyze starts inside a window.
func TestSettleCatalogsLeavesAutovacuumNothing(t *testing.T) {
	url := os.Getenv("FERRY_PG_URL")
	if url == "" {
		t.Skip("FERRY_PG_URL is not set: start the local stack to run the bench integration tests")
	}
	ctx := context.Background()
	dbURL, _ := privateDatabase(t, url)
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int
	if err := db.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 150000 {
		t.Skip("needs pg_stat_force_next_flush (PostgreSQL 15) to read the catalogs' counts without waiting")
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// What autovacuum would do to each catalog now, by its own rules.
	due := func() []string {
		t.Helper()
		if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query(ctx, `SELECT s.relname || ' (' || concat_ws(', ',
				CASE WHEN s.n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float8
					+ current_setting('autovacuum_vacuum_scale_factor')::float8 * greatest(c.reltuples, 0) THEN s.n_dead_tup || ' dead' END,
				CASE WHEN s.n_ins_since_vacuum > current_setting('autovacuum_vacuum_insert_threshold')::float8
					+ current_setting('autovacuum_vacuum_insert_scale_factor')::float8 * greatest(c.reltuples, 0) THEN s.n_ins_since_vacuum || ' inserted' END,
				CASE WHEN s.relname <> 'pg_statistic' AND s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8
					+ current_setting('autovacuum_analyze_scale_factor')::float8 * greatest(c.reltuples, 0) THEN s.n_mod_since_analyze || ' changed' END) || ')'
			FROM pg_stat_sys_tables s JOIN pg_class c ON c.oid = s.relid
			WHERE s.schemaname = 'pg_catalog' AND s.relname = ANY($1) ORDER BY 1`, benchCatalogs)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(s, "()") {
				out = append(out, s)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for i := 0; i < 60; i++ {
		for _, q := range []string{"CREATE TABLE churn (id bigserial PRIMARY KEY, v int NOT NULL DEFAULT 0) PARTITION BY HASH (id)",
			"CREATE TABLE churn_p0 PARTITION OF churn FOR VALUES WITH (MODULUS 2, REMAINDER 0)",
			"CREATE TABLE churn_p1 PARTITION OF churn FOR VALUES WITH (MODULUS 2, REMAINDER 1)",
			"DROP TABLE churn"} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := due()
	if len(before) == 0 {
		t.Fatal("the churn left autovacuum nothing to do on the catalogs: the test cannot tell settleCatalogs from a no-op")
	}
	waitCatalogHorizon(t, ctx, conn)
	// A snapshot held for two seconds more: the rows settleCatalogs'
	// ANALYZE makes dead stay visible to it, and settleCatalogs must wait.
	reader, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(ctx)
	if _, err := reader.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM pg_class`); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		time.Sleep(2 * time.Second)
		_, err := reader.Exec(ctx, `COMMIT`)
		released <- err
	}()
	b := &bencher{cfg: Config{ConnString: dbURL}.withDefaults(), db: db}
	holders, err := b.settleCatalogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if len(holders) > 0 {
		t.Skipf("after %s, the catalog rows settleCatalogs' ANALYZE made dead are still visible to %v: no VACUUM can remove them, so the test cannot tell", horizonWait, holders)
	}
	if after := due(); len(after) > 0 {
		t.Errorf("autovacuum still has work after settleCatalogs: %v (before: %v)", after, before)
	}
}

// waitCatalogHorizon waits until no transaction and no logical slot of the
// server (in any database: a slot's catalog_xmin holds back the catalogs
// of every one) can still see the catalog rows the test's churn made dead,
// so that a VACUUM can remove them. make test runs other packages beside
// this one, whose ferry slots and transactions hold the horizon back for
// moments; what holds it longer than the wait skips the test, named.
func waitCatalogHorizon(t *testing.T, ctx context.Context, conn *pgx.Conn) {
	t.Helper()
	var churned string
	if err := conn.QueryRow(ctx, `SELECT txid_current()::text`).Scan(&churned); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		holders, stuck, err := catalogHorizonHolders(ctx, conn, churned)
		if err != nil {
			t.Fatal(err)
		}
		if len(holders) == 0 {
			return
		}
		if stuck {
			t.Skipf("the catalog rows the churn made dead are visible to %v, slots no consumer reads: no VACUUM can remove them, so the test cannot tell", holders)
		}
		if time.Now().After(deadline) {
			t.Skipf("after 2 minutes, the catalog rows the churn made dead are still visible to %v: no VACUUM can remove them, so the test cannot tell", holders)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSettleCatalogsDoesNotWaitForAnIdleSlot leaves a logical slot that no
// consumer reads (as a crashed or removed consumer does): its catalog_xmin
// never moves, so settleCatalogs must name it and not wait horizonWait for
// it before every window.
func TestSettleCatalogsDoesNotWaitForAnIdleSlot(t *testing.T) {
	url := os.Getenv("FERRY_PG_URL")
	if url == "" {
		t.Skip("FERRY_PG_URL is not set: start the local stack to run the bench integration tests")
	}
	ctx := context.Background()
	dbURL, name := privateDatabase(t, url)
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	slot := name + "_idle"
	if _, err := db.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := db.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			t.Error(err)
		}
	}()
	if _, err := db.Exec(ctx, `CREATE TABLE churn (id int); DROP TABLE churn`); err != nil {
		t.Fatal(err)
	}
	var xid string
	if err := db.QueryRow(ctx, `SELECT txid_current()::text`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	holders, stuck, err := catalogHorizonHolders(ctx, db, xid)
	if err != nil {
		t.Fatal(err)
	}
	want := "slot " + slot + " (inactive)"
	if !slices.Contains(holders, want) {
		t.Fatalf("holders %v do not name %q", holders, want)
	}
	if !stuck {
		// make test's other packages hold the horizon for moments with
		// their own transactions and active slots.
		t.Skipf("besides the idle slot, %v hold the horizon: settleCatalogs rightly waits for them", holders)
	}
	b := &bencher{cfg: Config{ConnString: dbURL}.withDefaults(), db: db}
	start := time.Now()
	got, err := b.settleCatalogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, want) {
		t.Errorf("settleCatalogs returned %v, not naming %q", got, want)
	}
	if took := time.Since(start); took >= horizonWait {
		t.Errorf("settleCatalogs waited %s for a slot no consumer reads", took.Round(time.Millisecond))
	}
}
