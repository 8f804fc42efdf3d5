package replicator_test

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/replicator"
)

// Each misconfiguration makes ferry run fail with an error that names the
// fix, within a bound (never a hang), and ferry check report it as a
// blocking problem.

// startMisconfiguredPG is startPrivatePG with other server settings.
func startMisconfiguredPG(t *testing.T, settings string) *privatePG {
	t.Helper()
	p := startPrivatePG(t)
	if err := p.ctl("stop", "-m", "fast", "-w"); err != nil {
		t.Fatal(err)
	}
	if err := p.ctl("start", "-w", "-l", p.dir+"/log", "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 %s", p.port, p.dir, settings)); err != nil {
		t.Fatal(err)
	}
	return p
}

// runFails runs ferry until caught up and expects it to fail, naming every
// string of want, within a minute.
func runFails(t *testing.T, e *env, cfg replicator.Config, want ...string) {
	t.Helper()
	start := time.Now()
	err := e.catchUp(cfg) // a two-minute deadline
	assertError(t, "ferry run", err, want...)
	if d := time.Since(start); d > time.Minute {
		t.Errorf("ferry run took %s to fail", d.Round(time.Second))
	}
}

// checkBlocks expects ferry check to report a blocking problem of kind
// check whose detail or fix holds every string of want.
func checkBlocks(t *testing.T, cfg replicator.Config, check string, want ...string) {
	t.Helper()
	problems := runCheck(t, cfg)
	for _, p := range problems {
		text := p.Detail + " fix: " + p.Fix
		if p.Check != check || !p.Blocking {
			continue
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("ferry check's %s problem lacks %q: %s", check, w, text)
			}
		}
		t.Logf("ferry check: BLOCKS %s: %s", check, text)
		return
	}
	t.Errorf("ferry check reports no blocking %q problem: %+v", check, problems)
}

// runCheck runs ferry check, within a minute.
func runCheck(t *testing.T, cfg replicator.Config) []replicator.Problem {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	problems, err := replicator.Check(ctx, cfg)
	if err != nil {
		t.Fatalf("ferry check: %v", err)
	}
	return problems
}

// checkPasses expects ferry check to report no blocking problem.
func checkPasses(t *testing.T, cfg replicator.Config) {
	t.Helper()
	for _, p := range runCheck(t, cfg) {
		if p.Blocking {
			t.Errorf("ferry check blocks: %s: %s (fix: %s)", p.Check, p.Detail, p.Fix)
		}
	}
}

func TestWalLevelReplica(t *testing.T) {
	pg := startMisconfiguredPG(t, "-c wal_level=replica")
	e := newEnvAt(t, pg.URL)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	runFails(t, e, e.config(), `wal_level is "replica"`, "ALTER SYSTEM SET wal_level = logical", "restart")
	checkBlocks(t, e.config(), "wal_level", "logical", "restart PostgreSQL")
	bin := buildFerry(t)
	conn := []string{"--pg", e.pgURL, "--ch", e.chURL, "--slot", e.slot}
	ferryFails(t, bin, append([]string{"run", "--catch-up", "--metrics-addr", ""}, conn...), `wal_level is "replica"`)
	ferryFails(t, bin, append([]string{"check"}, conn...), "BLOCKS wal_level", "problems block ferry run")
}

// ferryFails runs the ferry binary and expects a non-zero exit within a
// minute, with every string of want in its output.
func ferryFails(t *testing.T, bin string, args []string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ferry %s did not exit within a minute:\n%s", args[0], out)
	}
	if err == nil {
		t.Errorf("ferry %s exited 0:\n%s", args[0], out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("ferry %s: output lacks %q:\n%s", args[0], w, out)
		}
	}
}

func TestNoFreeSlot(t *testing.T) {
	pg := startMisconfiguredPG(t, "-c wal_level=logical -c max_replication_slots=2 -c max_wal_senders=4")
	e := newEnvAt(t, pg.URL)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`,
		`SELECT pg_create_logical_replication_slot('other_1', 'pgoutput')`,
		`SELECT pg_create_logical_replication_slot('other_2', 'pgoutput')`)
	runFails(t, e, e.config(), "every replication slot is in use", "max_replication_slots", "pg_replication_slots")
	checkBlocks(t, e.config(), "replication slots", "all 2 replication slots are in use", "max_replication_slots")
}

// TestPublicationMissingTable: ferry runs as a role that owns its
// publication but not the tables, and is asked for a table the
// publication lacks: only an owner can add it.
func TestPublicationMissingTable(t *testing.T) {
	e := newEnv(t)
	role := "ferry_pub_" + e.db[len(e.db)-8:]
	e.exec(`CREATE TABLE listed (id int PRIMARY KEY)`, `CREATE TABLE extra (id int PRIMARY KEY)`,
		`INSERT INTO listed VALUES (1)`, `INSERT INTO extra VALUES (1)`)
	r := strings.NewReplacer("{role}", role, "{db}", e.db, "{tables}", "public.listed")
	for _, s := range leastPrivilegeSQL {
		e.adminExec(r.Replace(s))
	}
	e.exec(`GRANT SELECT ON extra TO ` + role)
	t.Cleanup(func() { dropRole(e, role) })
	cfg := e.config()
	cfg.ConnString = asRole(t, e.pgURL, role)
	cfg.Tables = []string{"public.listed", "public.extra"}
	runFails(t, e, cfg, "publication lacks public.extra, which ferry is to replicate", "must be owner of table", `ALTER PUBLICATION "ferry" SET TABLE`)
	checkBlocks(t, cfg, "publication", "lacks public.extra", `ALTER PUBLICATION "ferry" ADD TABLE "public"."extra"`)
	// Once replicating, a table added to --tables later: the same.
	cfg.Tables = []string{"public.listed"}
	e.mustCatchUp(cfg)
	cfg.Tables = []string{"public.listed", "public.extra"}
	runFails(t, e, cfg, "must be owner of table extra", `ALTER PUBLICATION "ferry" ADD TABLE "public"."extra"`)
}

// TestAppendPublicationMissing: ferry runs as a role that owns its main
// publication but not an append-only table, and no <publication>_append
// exists: only the table's owner can create it. ferry check says so and
// names the statement; once the owner ran it, ferry replicates the table.
func TestAppendPublicationMissing(t *testing.T) {
	e := newEnv(t)
	role := "ferry_app_" + e.db[len(e.db)-8:]
	e.exec(`CREATE TABLE listed (id int PRIMARY KEY)`, `CREATE TABLE events (at timestamptz NOT NULL DEFAULT now(), what text)`,
		`INSERT INTO listed VALUES (1)`, `INSERT INTO events (what) SELECT 'e' || g FROM generate_series(1, 100) g`)
	r := strings.NewReplacer("{role}", role, "{db}", e.db, "{tables}", "public.listed")
	for _, s := range leastPrivilegeSQL {
		e.adminExec(r.Replace(s))
	}
	t.Cleanup(func() { dropRole(e, role) })
	cfg := e.config()
	cfg.ConnString = asRole(t, e.pgURL, role)
	cfg.Tables = []string{"public.listed"}
	cfg.AppendOnly = []string{"public.events"}
	// Without SELECT on the table, the fix names the role.
	checkBlocks(t, cfg, "privileges", "no SELECT privilege on public.events", `GRANT SELECT ON "public"."events" TO "`+role+`"`)
	e.exec(`GRANT SELECT ON events TO ` + role)
	const create = `CREATE PUBLICATION "ferry_append" FOR TABLE "public"."events" WITH (publish = 'insert', publish_via_partition_root = true)`
	checkBlocks(t, cfg, "privileges", "publication ferry_append does not exist and the role does not own public.events", create)
	runFails(t, e, cfg, "publication ferry_append", "SQLSTATE 42501", create)

	e.adminExec(create, `ALTER PUBLICATION ferry_append OWNER TO `+role)
	checkPasses(t, cfg)
	e.mustCatchUp(cfg)
	e.exec(`INSERT INTO events (what) SELECT 'late' || g FROM generate_series(1, 10) g`)
	e.mustCatchUp(cfg)
	if got := e.chStrings("SELECT toString(count()) FROM " + e.table("events")); got[0][0] != "110" {
		t.Errorf("ClickHouse holds %s events, PostgreSQL 110", got[0][0])
	}
}

// TestSlotInUse: another consumer streams from ferry's slot, first
// pg_recvlogical and then a second ferry. ferry retries for
// SlotBusyTimeout (its own old walsender may linger), then fails naming
// the holder.
func TestSlotInUse(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`, `INSERT INTO t VALUES (1)`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	release := holdSlot(t, e)
	cfg.SlotBusyTimeout = 3 * time.Second
	runFails(t, e, cfg, "slot "+e.slot+" has been in use by another connection for 3s", `application_name "other_consumer"`, "--slot")
	checkBlocks(t, cfg, "slot", "in use by another connection", `application_name "other_consumer"`)
	release()

	first := e.streamInBackground(cfg)
	testkit.WaitFor(t, 2*time.Minute, "the first ferry to hold the slot", func() bool {
		return len(e.pgStrings(`SELECT 1 FROM pg_replication_slots s JOIN pg_stat_activity a ON a.pid = s.active_pid
			WHERE s.slot_name = '`+e.slot+`' AND a.application_name = 'ferry'`)) == 1
	})
	runFails(t, e, cfg, "has been in use by another connection", `application_name "ferry"`)
	first()
}

// holdSlot streams from e's slot with pg_recvlogical (application_name
// other_consumer) until the returned release is called.
func holdSlot(t *testing.T, e *env) (release func()) {
	t.Helper()
	recv, err := exec.LookPath("pg_recvlogical")
	if err != nil {
		recv = filepath.Join("/usr/lib/postgresql/15/bin", "pg_recvlogical")
	}
	// ferry's own walsender may linger a moment after a catch-up.
	testkit.WaitFor(t, 2*time.Minute, "the slot to be free", func() bool {
		return len(e.pgStrings(`SELECT 1 FROM pg_replication_slots WHERE slot_name = '`+e.slot+`' AND NOT active`)) == 1
	})
	holder := exec.Command(recv, "-d", e.pgURL, "--slot", e.slot, "--start", "-o", "proto_version=1",
		"-o", "publication_names=ferry", "-f", "/dev/null", "--no-loop")
	holder.Env = append(holder.Environ(), "PGAPPNAME=other_consumer")
	if err := holder.Start(); err != nil {
		t.Skipf("pg_recvlogical: %v", err)
	}
	release = func() { _ = holder.Process.Kill(); _ = holder.Wait() }
	t.Cleanup(release)
	testkit.WaitFor(t, 2*time.Minute, "pg_recvlogical to hold the slot", func() bool {
		return len(e.pgStrings(`SELECT 1 FROM pg_replication_slots s JOIN pg_stat_activity a ON a.pid = s.active_pid
			WHERE s.slot_name = '`+e.slot+`' AND a.application_name = 'other_consumer'`)) == 1
	})
	return release
}

// TestResyncWhileSlotHeld: ClickHouse tables to copy anew at a restart (one
// dropped, one whose columns are not the table's), and the first attempt
// fails after ferry has made them empty: the slot is still held, as by
// ferry's own old walsender right after a restart. The attempt that gets
// the slot must still copy them, not take the empty tables for copies
// (TestPartitionChangesWithoutCapture found it, under load, as a stop it
// did not expect).
func TestResyncWhileSlotHeld(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text)`, `CREATE TABLE b (id int PRIMARY KEY, v text)`,
		`INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 200) g`,
		`INSERT INTO b SELECT g, 'b' || g FROM generate_series(1, 300) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	release := holdSlot(t, e)
	ctx := context.Background()
	for _, q := range []string{"DROP TABLE " + e.table("a"), "ALTER TABLE " + e.table("b") + " ADD COLUMN junk String"} {
		if err := e.ch.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	e.exec(`UPDATE a SET v = 'changed' WHERE id <= 10`, `DELETE FROM b WHERE id > 250`)
	cfg.SlotBusyTimeout = 2 * time.Minute
	done := make(chan error, 1)
	go func() { done <- e.catchUp(cfg) }()
	testkit.WaitFor(t, 2*time.Minute, "ferry to make table a anew", func() bool {
		return e.chHasTable("a")
	})
	time.Sleep(2 * time.Second) // at least one attempt more finds the slot held
	release()
	if err := <-done; err != nil {
		t.Fatalf("catch up: %v", err)
	}
	counts := e.verifyAll(cfg)
	if counts["public.a"] != 200 || counts["public.b"] != 250 {
		t.Errorf("verified %v, want public.a 200 rows and public.b 250", counts)
	}
}

func asRole(t *testing.T, pgURL, role string) string {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// dropRole drops a role that owns objects and holds grants in e's database.
func dropRole(e *env, role string) {
	e.adminExec("DROP OWNED BY "+role, "DROP ROLE "+role)
}
