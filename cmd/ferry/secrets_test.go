package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// chTestPassword is the password of the stack's ClickHouse user
// ferry_secret (FERRY_CH_SECRET_URL).
const chTestPassword = "ferry-test-secret"

// TestPasswordFlags: a password from a flag or a file goes into the
// connection string; two sources for one password are an error.
func TestPasswordFlags(t *testing.T) {
	clearFerryEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("p@ss word\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := parse(t, "run", "--pg", "postgres://u@db/app", "--pg-password-file", file, "--ch", "clickhouse://ch:9000", "--ch-password-file", file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Run.PG != "postgres://u:p%40ss%20word@db/app" || c.Run.chPassword != "p@ss word" {
		t.Errorf("pg %q, ch password %q", c.Run.PG, c.Run.chPassword)
	}
	c, _, err = parse(t, "setup", "--pg", "postgres://admin@db/app", "--pg-password-file", file)
	if err != nil || c.Setup.PG != "postgres://admin:p%40ss%20word@db/app" {
		t.Errorf("setup: pg %q, err %v", c.Setup.PG, err)
	}
	t.Setenv("FERRY_PG_PASSWORD", "fromenv")
	c, _, err = parse(t, "verify", "--pg", "host=db user=u dbname=app")
	if err != nil {
		t.Fatal(err)
	}
	if c.Verify.PG != "host=db user=u dbname=app password='fromenv'" {
		t.Errorf("pg %q", c.Verify.PG)
	}
	os.Unsetenv("FERRY_PG_PASSWORD")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--pg", "postgres://u:x@db/app", "--pg-password-file", file}, "has a password and one is given apart"},
		{[]string{"run", "--pg", "postgres://u@db/app", "--pg-password", "a", "--pg-password-file", file}, "--pg-password and --pg-password-file are both set"},
		{[]string{"run", "--pg", "postgres://u@db/app", "--pg-password-file", empty}, "is empty"},
		{[]string{"run", "--pg", "postgres://u@db/app", "--pg-password-file", filepath.Join(dir, "none")}, "--pg-password-file"},
		{[]string{"load", "--from-kafka", "--ch", "clickhouse://ch:9000", "--ch-database", "d", "--ch-password", "a", "--ch-password-file", file}, "--ch-password and --ch-password-file"},
	} {
		_, _, err := parse(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "p@ss") {
			t.Errorf("%v: the error shows the password: %v", tc.args, err)
		}
	}
}

// TestPasswordSources runs ferry against a PostgreSQL role and a
// ClickHouse user that must give their passwords, taking them from files,
// from environment variables and from a PGPASSFILE; a wrong one fails
// clearly. No output shows a password.
func TestPasswordSources(t *testing.T) {
	chURL := os.Getenv("FERRY_CH_SECRET_URL")
	if chURL == "" {
		t.Skip("FERRY_CH_SECRET_URL is not set: start the stack with a deploy/stack.sh that has the ferry_secret user")
	}
	e := newOpsEnv(t)
	e.needPassword()
	e.exec("CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 300) g")
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	pgFile, chFile, badFile := write("pg", testPassword+"\n"), write("ch", chTestPassword+"\r\n"), write("bad", "wrong\n")
	u, _ := url.Parse(e.pgURL)
	passfile := write("pgpass", fmt.Sprintf("%s:%s:*:%s:%s\n", u.Hostname(), u.Port(), e.name, testPassword))
	u.User = url.User(e.name)
	pgNoPw := u.String()
	common := []string{"--pg", pgNoPw, "--ch", chURL, "--ch-database", e.name, "--slot", e.name}
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"files", nil, []string{"run", "--catch-up", "--metrics-addr", "", "--pg-password-file", pgFile, "--ch-password-file", chFile}},
		{"env", []string{"FERRY_PG_PASSWORD=" + testPassword, "FERRY_CH_PASSWORD=" + chTestPassword}, []string{"verify"}},
		{"env files", []string{"FERRY_PG_PASSWORD_FILE=" + pgFile, "FERRY_CH_PASSWORD_FILE=" + chFile}, []string{"verify"}},
		{"PGPASSFILE", []string{"PGPASSFILE=" + passfile, "FERRY_CH_PASSWORD=" + chTestPassword}, []string{"status"}},
		{"env, config print", []string{"FERRY_PG_PASSWORD=" + testPassword, "FERRY_CH_PASSWORD=" + chTestPassword}, []string{"config", "print"}},
	} {
		out, err := e.ferryEnv(c.env, append(c.args, common...)...)
		if err != nil {
			t.Errorf("passwords from %s: %v\n%s", c.name, err, out)
		}
		assertNoSecret(t, "passwords from "+c.name, out)
		if c.args[0] == "verify" && !strings.Contains(out, "ok       public.t: 300 rows") {
			t.Errorf("passwords from %s: verify did not compare 300 rows:\n%s", c.name, out)
		}
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong PostgreSQL password", []string{"verify", "--pg-password-file", badFile, "--ch-password-file", chFile}, "password authentication failed"},
		{"wrong ClickHouse password", []string{"verify", "--pg-password-file", pgFile, "--ch-password-file", badFile}, "ferry_secret"},
	} {
		out, err := e.ferryEnv(nil, append(c.args, common...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: err %v, want a failure saying %q:\n%s", c.name, err, c.want, out)
		}
		assertNoSecret(t, c.name, out)
	}
}

func assertNoSecret(t *testing.T, what, out string) {
	t.Helper()
	assertNoPassword(t, what, out)
	if strings.Contains(out, chTestPassword) {
		t.Errorf("%s printed the ClickHouse password:\n%s", what, out)
	}
}

// needPassword makes the env's role one that pg_hba.conf asks a password
// of (the stack's rule for members of ferry_password_auth), and skips the
// test when the server does not.
func (e *opsEnv) needPassword() {
	e.t.Helper()
	e.adminExec(`DO $$ BEGIN CREATE ROLE ferry_password_auth NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
		"GRANT ferry_password_auth TO "+e.name)
	u, _ := url.Parse(e.pgURL)
	u.User = url.UserPassword(e.name, "wrong")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, u.String()); err == nil {
		conn.Close(ctx)
		e.t.Skip("the stack's PostgreSQL takes any password (no scram-sha-256 rule for +ferry_password_auth in pg_hba.conf): restart the stack with the current deploy/stack.sh")
	}
}

// ferryEnv runs the binary with extra environment variables.
func (e *opsEnv) ferryEnv(env []string, args ...string) (string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		e.t.Errorf("ferry %s did not finish within 5 minutes", args[0])
	}
	return string(out), err
}

// TestMetricsLoopbackByDefault: ferry run (either sink) and ferry load
// serve their metrics on the loopback interface unless told otherwise,
// and a listener the flags put elsewhere is seen as such.
func TestMetricsLoopbackByDefault(t *testing.T) {
	clearFerryEnv(t)
	for _, args := range [][]string{
		{"run", "--pg", "postgres://db/app"},
		{"run", "--pg", "postgres://db/app", "--sink", "kafka"},
		{"load", "--from-kafka", "--ch", "clickhouse://ch:9000", "--ch-database", "d"},
	} {
		c, _, err := parse(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		addr := c.Run.MetricsAddr
		if args[0] == "load" {
			addr = c.Load.MetricsAddr
		}
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Errorf("%v: the metrics endpoint's default %q is not a loopback address", args, addr)
		}
		// What that default binds is loopback only.
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		if !isLoopback(ln.Addr()) {
			t.Errorf("%v: %s binds %s", args, addr, ln.Addr())
		}
		ln.Close()
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if isLoopback(ln.Addr()) {
		t.Errorf("%s (every interface) counted as loopback", ln.Addr())
	}
}
