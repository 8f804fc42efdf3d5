package replicator_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/replicator"
)

// buildFerry compiles the ferry binary for a test.
func buildFerry(t *testing.T) string { return testkit.BuildFerry(t) }

// TestKillMidBatch kills ferry with SIGKILL while it writes a large
// transaction in many batches and while it streams small ones, restarts it
// each time, and checks that nothing is lost or doubled.
func TestKillMidBatch(t *testing.T) {
	e := newEnv(t)
	bin := buildFerry(t)
	e.exec(`CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, pad text)`,
		`INSERT INTO items SELECT g, 0, repeat('p', 100) FROM generate_series(1, 20000) g`)
	args := []string{"run", "--pg", e.pgURL, "--ch", e.chURL, "--slot", e.slot, "--batch-rows", "2000", "--log-level", "warn", "--metrics-addr", ""}
	var stderr bytes.Buffer
	start := func(extra ...string) *exec.Cmd {
		cmd := exec.Command(bin, append(args, extra...)...)
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	chCount := func() int {
		rows := e.chStrings("SELECT toString(count()) FROM " + e.table("items"))
		n, _ := strconv.Atoi(rows[0][0])
		return n
	}
	kill := func(cmd *exec.Cmd) {
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
	}
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(5 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; ferry said:\n%s", what, stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	tableExists := func() bool {
		return e.chHasTable("items")
	}

	// 1. Killed during the initial copy, after some batches landed.
	cmd := start()
	waitFor("the initial copy to begin", func() bool { return tableExists() && chCount() > 0 })
	kill(cmd)

	// 2. Killed while streaming one 200k-row transaction in 2000-row batches.
	cmd = start()
	waitFor("the initial copy to finish", func() bool { return chCount() >= 20000 })
	e.exec(`UPDATE items SET v = v + 1`,
		`INSERT INTO items SELECT g, 1, 'big' FROM generate_series(100001, 300000) g`)
	waitFor("part of the big transaction", func() bool { return chCount() > 60000 })
	kill(cmd)

	// 3. Killed while small transactions stream.
	cmd = start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil && i < 3000; i++ {
			if _, err := e.pg.Exec(context.Background(), `UPDATE items SET v = v + 1 WHERE id = $1`, int64(i%500+1)); err != nil {
				t.Error(err)
				return
			}
			if i == 1500 {
				kill(cmd)
				cmd = start()
			}
		}
	}()
	<-done
	cancel()
	kill(cmd)

	// Restart and catch up: the end state must be PostgreSQL's, with every
	// replayed row collapsed by its version.
	catch := exec.Command(bin, append(args, "--catch-up")...)
	if out, err := catch.CombinedOutput(); err != nil {
		t.Fatalf("catch-up after kills: %v\n%s", err, out)
	}
	counts := e.verifyAll(e.config())
	if counts["public.items"] != 220000 {
		t.Errorf("items: %d rows, want 220000", counts["public.items"])
	}
	if t.Failed() {
		os.Stderr.Write(stderr.Bytes())
	}
}

// TestKillBeforeFlush kills ferry after PostgreSQL sent it a transaction but
// before the batch holding it was due: the transaction must not have been
// confirmed, so the restarted ferry receives and writes it.
func TestKillBeforeFlush(t *testing.T) {
	e := newEnv(t)
	bin := buildFerry(t)
	e.exec(`CREATE TABLE marks (id int PRIMARY KEY, v text)`, `INSERT INTO marks VALUES (0, 'seed')`)
	args := []string{"run", "--pg", e.pgURL, "--ch", e.chURL, "--slot", e.slot, "--log-level", "warn", "--metrics-addr", ""}
	if out, err := exec.Command(bin, append(args, "--catch-up")...).CombinedOutput(); err != nil {
		t.Fatalf("initial copy: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append(args, "--batch-age", "10s", "--batch-quiet", "0")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO marks VALUES (1, 'sent but not flushed')`)
	e.waitSent()
	time.Sleep(200 * time.Millisecond) // let ferry read it off the socket
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if got := e.chStrings("SELECT v FROM " + e.table("marks") + " FINAL WHERE id = 1"); len(got) != 0 {
		t.Fatalf("the row was flushed before its 10 s batch age: %v (the test needs it pending)", got)
	}
	if out, err := exec.Command(bin, append(args, "--catch-up")...).CombinedOutput(); err != nil {
		t.Fatalf("catch-up after kill: %v\n%s", err, out)
	}
	sameRows(t, "marks", e.chStrings("SELECT toString(id), v FROM "+e.table("marks")+" FINAL WHERE _ferry_deleted = 0 ORDER BY id"),
		[][]string{{"0", "seed"}, {"1", "sent but not flushed"}})
}

// waitSent waits until PostgreSQL has sent the env's slot everything
// written so far.
func (e *env) waitSent() {
	e.t.Helper()
	var after string
	if err := e.pg.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&after); err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var sent bool
		err := e.pg.QueryRow(context.Background(), `SELECT coalesce(bool_or(r.sent_lsn >= $1::pg_lsn), false)
			FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $2`, after, e.slot).Scan(&sent)
		if err != nil {
			e.t.Fatal(err)
		}
		if sent {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal("PostgreSQL did not send the slot its changes within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSigtermFlushes stops ferry with SIGTERM while a row waits in a batch:
// ferry must write it, confirm it, and exit 0.
func TestSigtermFlushes(t *testing.T) {
	e := newEnv(t)
	bin := buildFerry(t)
	e.exec(`CREATE TABLE marks (id int PRIMARY KEY, v text)`)
	args := []string{"run", "--pg", e.pgURL, "--ch", e.chURL, "--slot", e.slot, "--log-level", "warn", "--metrics-addr", ""}
	if out, err := exec.Command(bin, append(args, "--catch-up")...).CombinedOutput(); err != nil {
		t.Fatalf("initial copy: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append(args, "--batch-age", "1m", "--batch-quiet", "0")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO marks VALUES (1, 'pending at SIGTERM')`)
	e.waitSent()
	time.Sleep(200 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ferry exited with %v after SIGTERM:\n%s", err, out.String())
	}
	sameRows(t, "marks", e.chStrings("SELECT toString(id), v FROM "+e.table("marks")+" FINAL WHERE _ferry_deleted = 0"),
		[][]string{{"1", "pending at SIGTERM"}})
	// The walsender lets go of the slot a moment after ferry exits.
	for i := 0; i < 100; i++ {
		var active bool
		if err := e.pg.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, e.slot).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if !active {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var pending bool
	if err := e.pg.QueryRow(context.Background(), `SELECT confirmed_flush_lsn < pg_current_wal_lsn() - 0 AND EXISTS (
		SELECT 1 FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', 'ferry'))
		FROM pg_replication_slots WHERE slot_name = $1`, e.slot).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending {
		t.Error("the slot still holds changes ferry wrote before it exited: they were not confirmed")
	}
}

// TestIdleSlotAdvances checks that a slot whose tables get no writes still
// moves forward while other databases write, so it does not hold WAL back.
func TestIdleSlotAdvances(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE quiet (id int PRIMARY KEY)`)
	cfg := e.config()
	cfg.StandbyInterval = 200 * time.Millisecond
	e.mustCatchUp(cfg)
	s := e.sink()
	r, err := replicator.New(cfg, s, s, s.Capabilities(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	var start string
	if err := e.pg.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, e.slot).Scan(&start); err != nil {
		t.Fatal(err)
	}
	// WAL written elsewhere: a table outside the publication.
	e.exec(`CREATE TABLE noise (v text)`)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		e.exec(`INSERT INTO noise SELECT repeat('x', 1000) FROM generate_series(1, 100)`)
		var moved bool
		if err := e.pg.QueryRow(ctx, `SELECT confirmed_flush_lsn > $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, e.slot, start).Scan(&moved); err != nil {
			t.Fatal(err)
		}
		if moved {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the slot's confirmed position did not move in 20 s although WAL was written")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
