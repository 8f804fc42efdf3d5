package replicator_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

// tlsStack are the local stack's TLS endpoints: PostgreSQL with
// sslmode=verify-full, ClickHouse's secure native port, and their CA.
type tlsStack struct{ pgURL, chURL, ca string }

func tlsEndpoints(t *testing.T) tlsStack {
	t.Helper()
	ts := tlsStack{os.Getenv("FERRY_PG_TLS_URL"), os.Getenv("FERRY_CH_TLS_URL"), os.Getenv("FERRY_TLS_CA")}
	if ts.pgURL == "" || ts.chURL == "" || ts.ca == "" {
		t.Skip("FERRY_PG_TLS_URL, FERRY_CH_TLS_URL and FERRY_TLS_CA are not set: `make stack-up` (a stack started by a deploy/stack.sh with TLS) and `. .stack/env`")
	}
	return ts
}

// TestTLSReplication runs the ferry binary over TLS to both sides:
// sslmode=verify-full to PostgreSQL, for the SQL and the replication
// connections, and the secure native port to ClickHouse with the stack's
// CA; the copy and the stream arrive, and ferry verify passes.
func TestTLSReplication(t *testing.T) {
	ts := tlsEndpoints(t)
	e := newEnvAt(t, ts.pgURL)
	bin := buildFerry(t)
	e.exec(`CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric(12,2))`,
		`INSERT INTO accounts SELECT g, 'owner ' || g, g * 1.5 FROM generate_series(1, 2000) g`)
	args := []string{"--pg", e.pgURL, "--ch", ts.chURL, "--ch-ca-file", ts.ca, "--slot", e.slot}
	run := exec.Command(bin, append([]string{"run", "--metrics-addr", "", "--log-level", "warn"}, args...)...)
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill() //nolint:errcheck // stopped below; this is for a failed test
	// The walsender holding the slot serves a TLS connection. Read in one
	// query with the slot's holder: the slot is let go for a moment
	// between the connection that made it (and the initial copy's
	// snapshot) and the one that streams, and a busy machine once fell in
	// that moment between two queries (pg_stat_ssl said []).
	var ssl [][]string
	testkit.WaitFor(t, 3*time.Minute, "ferry to stream from its slot", func() bool {
		ssl = e.pgStrings(`SELECT s.ssl::text, s.version FROM pg_stat_ssl s JOIN pg_replication_slots r ON r.active_pid = s.pid WHERE r.slot_name = '` + e.slot + `'`)
		return len(ssl) == 1
	})
	if ssl[0][0] != "true" {
		t.Errorf("the replication connection is not TLS: pg_stat_ssl says %v", ssl)
	}
	e.exec(`UPDATE accounts SET balance = balance + 1 WHERE id % 3 = 0`, `DELETE FROM accounts WHERE id > 1900`,
		`INSERT INTO accounts VALUES (5000, 'new', NULL)`)
	testkit.WaitFor(t, 3*time.Minute, "the changes to reach ClickHouse", func() bool {
		got := e.chStrings(`SELECT toString(count()) FROM ` + e.table("accounts") + ` FINAL WHERE _ferry_deleted = 0`)
		return len(got) == 1 && got[0][0] == "1901"
	})
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("ferry run over TLS: %v\n%s", err, out.String())
	}
	verifyOut, err := exec.Command(bin, append([]string{"verify"}, args...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(verifyOut), "all 1 tables match") {
		t.Errorf("ferry verify over TLS: %v\n%s", err, verifyOut)
	}
	cfg := e.config()
	if n := e.verifyAll(cfg)["public.accounts"]; n != 1901 {
		t.Errorf("%d rows, want 1901", n)
	}
}

// TestTLSErrors: a CA that did not sign the server's certificate, and a
// host name the certificate does not list, fail at once (no retrying) with
// an error naming the side and the setting to change.
func TestTLSErrors(t *testing.T) {
	ts := tlsEndpoints(t)
	wrongCA := testkit.WriteOtherCA(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pgWrongCA := strings.Replace(ts.pgURL, "sslrootcert="+url.QueryEscape(ts.ca), "sslrootcert="+url.QueryEscape(wrongCA), 1)
	pgWrongCA = strings.Replace(pgWrongCA, "sslrootcert="+ts.ca, "sslrootcert="+wrongCA, 1)
	pgOtherName := withHost(t, ts.pgURL, forward(t, "127.0.0.2", hostOf(t, ts.pgURL)))
	for _, c := range []struct {
		name, url string
		want      []string
	}{
		{"wrong CA", pgWrongCA, []string{"PostgreSQL TLS", "not signed by a CA ferry trusts", "sslrootcert"}},
		{"name not in the certificate", pgOtherName, []string{"PostgreSQL TLS", "does not name host 127.0.0.2", "verify-full", "verify-ca"}},
	} {
		_, err := replicator.Check(ctx, replicator.Config{ConnString: c.url})
		assertError(t, "PostgreSQL, "+c.name, err, c.want...)
		if !replicator.IsTLSError(err) || replicator.IsConnectionError(err) {
			t.Errorf("PostgreSQL, %s: a TLS error must not be retried as a lost connection: %v", c.name, err)
		}
	}
	// ferry run stops on it rather than retrying for ever.
	e := newEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	cfg := e.config()
	cfg.ConnString = strings.Replace(pgWrongCA, "/postgres?", "/"+e.db+"?", 1)
	start := time.Now()
	err := e.catchUp(cfg)
	assertError(t, "ferry run with a wrong CA", err, "PostgreSQL TLS", "sslrootcert")
	if time.Since(start) > 20*time.Second {
		t.Errorf("ferry run took %s to give up on a TLS error", time.Since(start))
	}

	chOtherName := withHost(t, ts.chURL, forward(t, "127.0.0.2", hostOf(t, ts.chURL)))
	for _, c := range []struct {
		name string
		cfg  clickhouse.Config
		want []string
	}{
		{"wrong CA", clickhouse.Config{DSN: ts.chURL, CAFile: wrongCA}, []string{"ClickHouse TLS", "not signed by a CA ferry trusts", "--ch-ca-file"}},
		{"name not in the certificate", clickhouse.Config{DSN: chOtherName, CAFile: ts.ca}, []string{"ClickHouse TLS", "does not name that host", "tls_server_name"}},
		{"TLS to the plain port", clickhouse.Config{DSN: os.Getenv("FERRY_CH_URL"), CAFile: ts.ca}, []string{"ClickHouse TLS", "does not speak TLS", "tcp_port_secure"}},
		{"CA file missing", clickhouse.Config{DSN: ts.chURL, CAFile: filepath.Join(t.TempDir(), "none.pem")}, []string{"--ch-ca-file", "none.pem"}},
	} {
		s, err := clickhouse.New(ctx, c.cfg)
		if err == nil {
			s.Close()
		}
		assertError(t, "ClickHouse, "+c.name, err, c.want...)
		if err != nil && clickhouse.IsRetryable(err) {
			t.Errorf("ClickHouse, %s: a TLS error must not be retried: %v", c.name, err)
		}
	}
}

func assertError(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	t.Logf("%s: %v", what, err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error lacks %q: %v", what, w, err)
		}
	}
}

// forward relays TCP connections from a port on host to target, so that
// the server is reached under a name (host) its certificate lacks.
func forward(t *testing.T, host, target string) string {
	t.Helper()
	p, err := testkit.StartProxyOn(host, target)
	if err != nil {
		t.Skipf("cannot listen on %s (needs the whole of 127.0.0.0/8 on the loopback interface, as Linux has): %v", host, err)
	}
	t.Cleanup(p.Close)
	return p.Addr()
}

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func withHost(t *testing.T, raw, host string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = host
	return u.String()
}

// TestTLSRefused: sslmode=require against a server without TLS fails
// naming the server's setting and sslmode.
func TestTLSRefused(t *testing.T) {
	pg := startPrivatePG(t) // ssl = off
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := replicator.Check(ctx, replicator.Config{ConnString: strings.Replace(pg.URL, "sslmode=disable", "sslmode=require", 1)})
	assertError(t, "sslmode=require to a server without TLS", err, "PostgreSQL TLS", "does not accept TLS", "sslmode")
	if !replicator.IsTLSError(err) {
		t.Errorf("not a TLS error: %v", err)
	}
}
