package replicator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// TestParallelCopyUnderWrites copies two tables big enough to be read in
// page ranges by four connections while a writer keeps moving rows of the
// keyed one from page to page. Each writer transaction moves one unit of n
// from a row to another, so every consistent snapshot holds the same count
// and sum: a range read under another snapshot than the rest would see a
// moved row twice or not at all. The copy alone is checked (a first start
// with --catch-up streams nothing), then the stream, against PostgreSQL.
func TestParallelCopyUnderWrites(t *testing.T) {
	e := newEnv(t)
	const rows = 40000
	// ~900-byte rows, 8 to a full page (fillfactor 100): an update cannot
	// stay on its page, so the new version goes to the table's end, which
	// is another range than most rows' own.
	e.exec(`CREATE TABLE big (id int PRIMARY KEY, n int NOT NULL, pad text NOT NULL) WITH (fillfactor = 100)`,
		fmt.Sprintf(`INSERT INTO big SELECT g, 100, repeat(md5(g::text), 28) FROM generate_series(1, %d) g`, rows),
		`CREATE TABLE ev (k int NOT NULL, pad text NOT NULL)`,
		fmt.Sprintf(`INSERT INTO ev SELECT g %% 10, repeat(md5(g::text), 28) FROM generate_series(1, %d) g`, rows),
		`VACUUM ANALYZE big`, `VACUUM ANALYZE ev`)

	moved, stopMoving := startMover(t, e.pgURL, rows)
	for moved.Load() < 50 { // let the writer get going, so that it runs during the whole copy
		time.Sleep(10 * time.Millisecond)
	}

	logs, seen := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))
	cfg.CopyWorkers = 4
	cfg.AppendOnly = []string{"public.ev"}
	cfg.Tables = []string{"public.big", "public.ev"}
	before := moved.Load()
	e.mustCatchUp(cfg)
	during := moved.Load() - before
	for _, entry := range seen.FilterMessage("copying table in page ranges").All() {
		t.Logf("%s: %v", entry.Message, entry.ContextMap())
	}
	if n := seen.FilterMessage("copying table in page ranges").Len(); n != 2 {
		t.Fatalf("%d tables were copied in page ranges, want both", n)
	}
	if during == 0 {
		t.Fatal("the writer moved no row while the tables were copied")
	}
	t.Logf("the writer moved %d units during the copy", during)

	// The copy alone: every row exactly once, all from one snapshot.
	sameRows(t, "big after the copy (all inserted rows, live rows, sum of n)",
		e.chStrings("SELECT toString(count()), toString(countIf(_ferry_deleted = 0)), toString(sum(n)) FROM "+e.table("big")),
		[][]string{{fmt.Sprint(rows), fmt.Sprint(rows), fmt.Sprint(rows * 100)}})
	sameRows(t, "ev after the copy (rows, distinct seq)",
		e.chStrings("SELECT toString(count()), toString(uniqExact(_ferry_seq)) FROM "+e.table("ev")+" FINAL"),
		[][]string{{fmt.Sprint(rows), fmt.Sprint(rows)}})

	stopMoving()
	e.mustCatchUp(cfg)
	counts := e.verifyAll(cfg)
	if counts["public.big"] != rows || counts["public.ev"] != rows {
		t.Errorf("rows: %v, want %d in each table", counts, rows)
	}

	// A restart that finds a table missing in ClickHouse copies it again
	// under a snapshot of its own, exported to the other workers.
	if err := e.ch.Exec(context.Background(), "DROP TABLE "+e.table("big")); err != nil {
		t.Fatal(err)
	}
	ranged := seen.FilterMessage("copying table in page ranges").Len()
	e.mustCatchUp(cfg)
	if n := seen.FilterMessage("copying table in page ranges").Len() - ranged; n != 1 {
		t.Errorf("the restart copied %d tables in page ranges, want big", n)
	}
	counts = e.verifyAll(cfg)
	if counts["public.big"] != rows {
		t.Errorf("big after the copy on restart: %d rows, want %d", counts["public.big"], rows)
	}
}

// startMover moves one unit of big.n from a random row to another, one
// transaction at a time, until stop is called.
func startMover(t *testing.T, pgURL string, rows int) (moved *atomic.Int64, stop func()) {
	moved = &atomic.Int64{}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgx.Connect(context.Background(), pgURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		rnd := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-done:
				return
			default:
			}
			a, b := rnd.IntN(rows)+1, rnd.IntN(rows)+1
			if _, err := conn.Exec(context.Background(), fmt.Sprintf(
				`BEGIN; UPDATE big SET n = n - 1 WHERE id = %d; UPDATE big SET n = n + 1 WHERE id = %d; COMMIT`, a, b)); err != nil {
				t.Error(err)
				return
			}
			moved.Add(1)
		}
	}()
	return moved, func() { close(done); wg.Wait() }
}

// TestParallelCopyWithWaitingDDL queues an ACCESS EXCLUSIVE lock (what an
// ALTER TABLE takes) on a table while the copy holds it and other workers
// have yet to start on it. A worker that then asked for the table's lock
// would wait behind the ALTER, which waits for the copy: the copy must not
// hang, and must leave those ranges to the connection that holds the lock.
// When the first connection happens to copy every range of the table
// itself (its workers started late), the case did not arise: it tries again.
func TestParallelCopyWithWaitingDDL(t *testing.T) {
	// Each attempt checks the rows; whether a worker meets the queued lock
	// is a race: the other workers may lock the table before the ALTER is
	// queued, or the first connection may copy every range itself.
	const attempts = 8
	for attempt := 1; attempt <= attempts; attempt++ {
		if copyWithWaitingDDL(t) {
			return
		}
		t.Logf("attempt %d: no worker met the queued lock; again", attempt)
	}
	t.Errorf("no worker left a range of the locked table to the first connection in %d attempts: the test did not set up what it tests", attempts)
}

// copyWithWaitingDDL runs the case once and reports whether a worker left
// ranges to the first connection.
func copyWithWaitingDDL(t *testing.T) bool {
	e := newEnv(t)
	const rows = 40000
	for _, name := range []string{"first", "second"} {
		e.exec(fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, pad text NOT NULL)`, name),
			fmt.Sprintf(`INSERT INTO %s SELECT g, repeat(md5(g::text), 28) FROM generate_series(1, %d) g`, name, rows),
			"VACUUM ANALYZE "+name)
	}
	ddl := make(chan error, 1)
	logs, seen := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	go func() { ddl <- lockWhenFerryHolds(e.pgURL, "second", cfg.Slot) }()
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))
	cfg.CopyWorkers = 4
	cfg.Tables = []string{"public.first", "public.second"}
	e.mustCatchUp(cfg)
	if err := <-ddl; err != nil {
		t.Fatalf("the concurrent lock: %v", err)
	}
	counts := e.verifyAll(cfg)
	if counts["public.first"] != rows || counts["public.second"] != rows {
		t.Errorf("rows: %v, want %d in each table", counts, rows)
	}
	return seen.FilterMessage("a schema change waits for the copy to end: the other connections left ranges to the first").Len() > 0
}

// lockWhenFerryHolds waits for the initial copy's lock on table (an
// ACCESS SHARE lock that a ferry connection holds once slot exists), then
// takes the table's ACCESS EXCLUSIVE lock, waiting up to 100 s, and
// commits. (Any ferry lock would not do: the CREATE PUBLICATION before the
// slot locks the table for a moment too, and an ALTER queued then was
// done long before the copy, which left the case untested: 8 attempts of
// 8 in a CI run.)
func lockWhenFerryHolds(pgURL, table, slot string) error {
	conn, err := pgx.Connect(context.Background(), pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE l.relation = $1::regclass AND l.granted AND l.mode = 'AccessShareLock' AND a.application_name = 'ferry'
			  AND EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $2)`, table, slot).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ferry never locked %s", table)
		}
	}
	_, err = conn.Exec(context.Background(), `BEGIN; SET LOCAL lock_timeout = '100s'; LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE; COMMIT`)
	return err
}

// TestParallelCopyWithFewConnections copies as a role whose connection
// limit leaves room for fewer workers than asked for: those that cannot
// connect stand down, and the others copy every row.
func TestParallelCopyWithFewConnections(t *testing.T) {
	e := newEnv(t)
	const rows = 40000
	role := e.db + "_few"
	e.exec(`CREATE TABLE big (id int PRIMARY KEY, pad text NOT NULL)`,
		fmt.Sprintf(`INSERT INTO big SELECT g, repeat(md5(g::text), 28) FROM generate_series(1, %d) g`, rows),
		`VACUUM ANALYZE big`)
	e.adminExec("CREATE ROLE "+role+" LOGIN REPLICATION CONNECTION LIMIT 5",
		"ALTER TABLE big OWNER TO "+role,
		"GRANT CREATE ON DATABASE "+e.db+" TO "+role,
		"GRANT SELECT ON big TO "+e.db) // for verify, which reads as the env's role
	t.Cleanup(func() { // before the database goes: the role owns objects in it
		admin, err := pgx.Connect(context.Background(), e.adminURL)
		if err != nil {
			t.Logf("cleanup of role %s: %v", role, err)
			return
		}
		defer admin.Close(context.Background())
		for _, s := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := admin.Exec(context.Background(), s); err != nil {
				t.Logf("%s: %v", s, err)
			}
		}
	})
	u, err := url.Parse(e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)

	logs, seen := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	cfg.ConnString = u.String()
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))
	cfg.CopyWorkers = 8
	cfg.Tables = []string{"public.big"}
	e.mustCatchUp(cfg)
	if n := seen.FilterMessage("a copy connection could not start; copying with fewer").Len(); n == 0 {
		t.Error("every copy connection started: the limit did not bite")
	} else {
		t.Logf("%d copy connections could not start", n)
	}
	if counts := e.verifyAll(cfg); counts["public.big"] != rows {
		t.Errorf("rows: %v, want %d", counts, rows)
	}
}
