package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// firstStartLimit is the deadline of a command that should fail at once:
// generous for a loaded machine, far below "for ever".
const firstStartLimit = 2 * time.Minute

// runToEnd runs the binary and returns its output, its exit code and how
// long it took; it fails the test when the command outlives
// firstStartLimit, which before the fix ferry run always did.
func runToEnd(t *testing.T, args ...string) (string, int, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), firstStartLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = cleanEnv()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Errorf("ferry %s was still running after %s:\n%s", args[0], firstStartLimit, tail(string(out)))
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code, took
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}

// TestFirstStartWrongAddress: every command that talks to PostgreSQL,
// given an address where nothing listens, a wrong password or a database
// that does not exist, exits 1 at once with a message that names what is
// wrong and where to look, and no password. Before, ferry run (with or
// without --catch-up) retried for ever, logging "connection lost".
func TestFirstStartWrongAddress(t *testing.T) {
	e := newOpsEnv(t)
	e.needPassword()
	closed := freeAddr(t)
	u, _ := url.Parse(e.pgURL)
	u.Host = closed
	nowhere := u.String()
	u, _ = url.Parse(e.pgURL)
	u.User = url.UserPassword(e.name, testPassword+"-wrong")
	wrongPassword := u.String()
	u, _ = url.Parse(e.pgURL)
	u.Path = "/" + e.name + "_missing"
	wrongDatabase := u.String()
	chFlags := []string{"--ch", e.chURL, "--ch-database", e.name}
	commands := [][]string{
		append([]string{"run", "--catch-up", "--metrics-addr", "", "--slot", e.name}, chFlags...),
		append([]string{"run", "--metrics-addr", "", "--slot", e.name}, chFlags...),
		append([]string{"verify"}, chFlags...),
		{"status", "--slot", e.name},
		{"setup"},
	}
	for _, c := range []struct {
		name, pg string
		want     []string
	}{
		{"closed port", nowhere, []string{"nothing listens at " + closed + " (connection refused)", "check the host and port in --pg"}},
		{"wrong password", wrongPassword, []string{`refused the password of user "` + e.name + `"`, "password authentication failed"}},
		{"wrong database", wrongDatabase, []string{`has no database "` + e.name + `_missing"`, "check the database name"}},
	} {
		for _, args := range commands {
			what := c.name + ": ferry " + args[0]
			out, code, took := runToEnd(t, append(args, "--pg", c.pg)...)
			t.Logf("%s: exit %d after %s", what, code, took.Round(time.Millisecond))
			if code != 1 {
				t.Errorf("%s: exit code %d, want 1:\n%s", what, code, tail(out))
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s: the output does not say %q:\n%s", what, w, tail(out))
				}
			}
			if strings.Contains(out, "connection lost") {
				t.Errorf("%s: retried a connection that never worked:\n%s", what, tail(out))
			}
			assertNoSecret(t, what, out)
		}
	}
}

// TestFirstStartNoBroker: ferry load, and ferry run --sink kafka, fail at
// once when no Kafka broker listens at --kafka-brokers.
func TestFirstStartNoBroker(t *testing.T) {
	e := newOpsEnv(t)
	closed := freeAddr(t)
	for _, args := range [][]string{
		{"load", "--from-kafka", "--catch-up", "--metrics-addr", "", "--kafka-brokers", closed, "--ch", e.chURL, "--ch-database", e.name},
		{"load", "--from-kafka", "--metrics-addr", "", "--kafka-brokers", closed, "--ch", e.chURL, "--ch-database", e.name},
		{"run", "--sink", "kafka", "--catch-up", "--metrics-addr", "", "--kafka-brokers", closed, "--pg", e.pgURL, "--slot", e.name},
	} {
		what := strings.Join(args[:3], " ")
		out, code, took := runToEnd(t, args...)
		t.Logf("ferry %s: exit %d after %s", what, code, took.Round(time.Millisecond))
		if code != 1 || !strings.Contains(out, "cannot reach the Kafka brokers "+closed+": check --kafka-brokers") {
			t.Errorf("ferry %s: exit code %d, want 1 and a message naming the brokers and --kafka-brokers:\n%s", what, code, tail(out))
		}
		assertNoSecret(t, what, out)
	}
}

// TestFirstStartNoClickHouse: ferry load (with a broker that answers) and
// ferry run fail at once when nothing listens at --ch's address, naming
// it and the flag.
func TestFirstStartNoClickHouse(t *testing.T) {
	e := newOpsEnv(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	closed := freeAddr(t)
	nowhere := "clickhouse://default@" + closed + "/default"
	for _, args := range [][]string{
		{"load", "--from-kafka", "--catch-up", "--metrics-addr", "", "--kafka-brokers", cluster.ListenAddrs()[0], "--ch", nowhere, "--ch-database", e.name},
		{"load", "--from-kafka", "--metrics-addr", "", "--kafka-brokers", cluster.ListenAddrs()[0], "--ch", nowhere, "--ch-database", e.name},
		{"run", "--catch-up", "--metrics-addr", "", "--pg", e.pgURL, "--slot", e.name, "--ch", nowhere},
	} {
		what := strings.Join(args[:3], " ")
		out, code, took := runToEnd(t, args...)
		t.Logf("ferry %s: exit %d after %s", what, code, took.Round(time.Millisecond))
		if code != 1 || !strings.Contains(out, "cannot reach "+closed) || !strings.Contains(out, "check the address in --ch (FERRY_CH_URL)") {
			t.Errorf("ferry %s: exit code %d, want 1 and a message naming %s and --ch:\n%s", what, code, closed, tail(out))
		}
		if took > time.Minute || strings.Contains(out, "connection lost") {
			t.Errorf("ferry %s: took %s, or retried:\n%s", what, took, tail(out))
		}
	}
}

// TestLostConnectionRetriedThenGivenUp: a connection that worked and is
// then lost is retried ("connection lost" and attempts in the log), up to
// --retry-for; then ferry exits 1 naming the last error.
func TestLostConnectionRetriedThenGivenUp(t *testing.T) {
	e := newOpsEnv(t)
	e.exec("CREATE TABLE t (id int PRIMARY KEY)", "INSERT INTO t SELECT generate_series(1, 10)")
	u, _ := url.Parse(e.pgURL)
	proxy, err := testkit.StartProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "run", "--metrics-addr", "", "--retry-for", "10s", "--pg", u.String(),
		"--ch", e.chURL, "--ch-database", e.name, "--slot", e.name)
	cmd.Env = cleanEnv()
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 3*time.Minute, "ferry streaming", func() bool { return strings.Contains(out.String(), "streaming") })
	proxy.Close()
	lost := time.Now()
	err = cmd.Wait()
	took := time.Since(lost)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("ferry run ended with %v, want exit code 1:\n%s", err, tail(out.String()))
	}
	log := out.String()
	if n := strings.Count(log, "connection lost; starting again from the last confirmed position"); n < 2 {
		t.Errorf("%d retries logged, want 2 or more:\n%s", n, tail(log))
	}
	if !strings.Contains(log, "gave up after retrying for") || !strings.Contains(log, "--retry-for") {
		t.Errorf("the output does not say that ferry gave up, and which flag sets how long:\n%s", tail(log))
	}
	if took < 10*time.Second {
		t.Errorf("gave up %s after the connection was lost, before --retry-for's 10s", took.Round(time.Millisecond))
	}
	t.Logf("gave up %s after the proxy closed: %s", took.Round(time.Millisecond), log[strings.LastIndex(log, "ferry: "):])
	assertNoSecret(t, "ferry run", log)
}

// chDatabaseExists asks ClickHouse whether database name exists.
func (e *opsEnv) chDatabaseExists(name string) bool {
	e.t.Helper()
	conn, err := e.chConn()
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	var n uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.databases WHERE name = '"+name+"'").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n > 0
}

// chTables lists the tables of ClickHouse database db with their rows.
func (e *opsEnv) chTables(db string) []string {
	e.t.Helper()
	opts, err := ch.ParseDSN(e.chURL)
	if err != nil {
		e.t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(context.Background(), "SELECT name FROM system.tables WHERE database = '"+db+"'")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		var count uint64
		_ = conn.QueryRow(context.Background(), "SELECT count() FROM "+db+"."+n).Scan(&count)
		names = append(names, fmt.Sprintf("%s (%d rows)", n, count))
	}
	return names
}

// TestFailedFirstStartLeavesNoDatabase: a first start of ferry run that
// fails (PostgreSQL refuses the connection; the publication cannot be
// created, as the role does not own the table) drops the ClickHouse
// database it created, and says so; a database that was there before is
// left alone. Before, both failures left an empty database behind, with
// only ferry's bookkeeping tables in it.
func TestFailedFirstStartLeavesNoDatabase(t *testing.T) {
	e := newOpsEnv(t)
	u, _ := url.Parse(os.Getenv("FERRY_PG_URL"))
	u.Path = "/" + e.name
	owner, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(context.Background())
	// A table of another owner: the role may read it, but not publish it.
	for _, s := range []string{"CREATE TABLE foreign_owned (id int PRIMARY KEY)", "GRANT SELECT ON foreign_owned TO " + e.name} {
		if _, err := owner.Exec(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	closed := freeAddr(t)
	u, _ = url.Parse(e.pgURL)
	u.Host = closed
	nowhere := u.String()
	for _, c := range []struct {
		name, pg string
		extra    []string
		existed  bool
		want     string
	}{
		{"closed port", nowhere, nil, false, "nothing listens at " + closed},
		{"publication refused", e.pgURL, []string{"--tables", "public.foreign_owned", "--publication", e.name}, false, "foreign_owned"},
		{"database there before", nowhere, nil, true, "nothing listens at " + closed},
	} {
		if err := e.chExec("DROP DATABASE IF EXISTS " + e.name); err != nil {
			t.Fatal(err)
		}
		if c.existed {
			if err := e.chExec("CREATE DATABASE " + e.name); err != nil {
				t.Fatal(err)
			}
		}
		args := append([]string{"run", "--catch-up", "--metrics-addr", "", "--slot", e.name, "--pg", c.pg,
			"--ch", e.chURL, "--ch-database", e.name}, c.extra...)
		out, code, took := runToEnd(t, args...)
		t.Logf("%s: exit %d after %s: %s", c.name, code, took.Round(time.Millisecond), out[strings.LastIndex(out, "ferry: "):])
		if code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, want 1 and %q in the output:\n%s", c.name, code, c.want, tail(out))
		}
		said := strings.Contains(out, "ferry dropped ClickHouse database "+e.name+" again")
		exists := e.chDatabaseExists(e.name)
		if c.existed && (!exists || said) {
			t.Errorf("%s: a database that was there before: exists %v afterwards, drop reported %v", c.name, exists, said)
		}
		if !c.existed && (exists || !said) {
			t.Errorf("%s: the database ferry created: exists %v afterwards (tables %v), drop reported %v:\n%s",
				c.name, exists, e.chTables(e.name), said, tail(out))
		}
	}
}

// TestFirstStartServerRefusesForNow: a PostgreSQL that answers but takes
// no connection for now is waited for on a first start, not taken for a
// wrong address. Here the role's CONNECTION LIMIT 0 makes the server
// answer "too many connections" (53300); a server starting up or in
// recovery (57P03) takes the same path. ferry run --catch-up started so
// copies the table once the limit is lifted. Before, it exited at once:
// "not retried: ferry has not reached PostgreSQL since it started".
func TestFirstStartServerRefusesForNow(t *testing.T) {
	e := newOpsEnv(t)
	e.exec("CREATE TABLE items (id bigint PRIMARY KEY, v text)",
		"INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 50) g")
	e.adminExec("ALTER ROLE " + e.name + " CONNECTION LIMIT 0")
	var out testkit.Buffer
	cmd := exec.Command(binPath, e.args("run", "--catch-up", "--metrics-addr", "")...)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var exited error
	testkit.WaitFor(t, firstStartLimit, "ferry's log of the refused connection", func() bool {
		select {
		case exited = <-done:
			return true
		default:
		}
		return strings.Contains(out.String(), "refuses connections for now; trying again")
	})
	if exited == nil {
		select {
		case exited = <-done:
		case <-time.After(time.Second):
		}
	}
	if exited != nil {
		t.Fatalf("ferry run exited while PostgreSQL refused its connections (%v):\n%s", exited, tail(out.String()))
	}
	e.adminExec("ALTER ROLE " + e.name + " CONNECTION LIMIT -1")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ferry run --catch-up: %v\n%s", err, tail(out.String()))
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("ferry run --catch-up did not end within 5 minutes of the limit's end:\n%s", tail(out.String()))
	}
	if got, want := e.live("items"), e.pgLive("items"); got != want {
		t.Errorf("ClickHouse holds %s (rows/sum of ids/length), PostgreSQL %s", got, want)
	}
	assertNoSecret(t, "ferry run", out.String())
}
