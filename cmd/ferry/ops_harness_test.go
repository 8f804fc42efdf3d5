package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// testPassword is set on each test's role; no output may contain it.
const testPassword = "S3cret-xyz"

// opsEnv is one test's PostgreSQL role and database (owned by the role,
// reached with a URL that carries its password), ClickHouse database and
// slot on the local stack, and a built ferry binary.
type opsEnv struct {
	t     *testing.T
	name  string
	pgURL string
	chURL string
	pg    *pgx.Conn // as the role
	admin *pgx.Conn
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binary ferryBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// ferryBinary builds ferry once per test run.
func ferryBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ferry-test-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ferry")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

func newOpsEnv(t *testing.T) *opsEnv {
	t.Helper()
	base, chURL := os.Getenv("FERRY_PG_URL"), os.Getenv("FERRY_CH_URL")
	if base == "" || chURL == "" {
		t.Skip("FERRY_PG_URL and FERRY_CH_URL are not set: run `make stack-up` and `. .stack/env` (make test does both)")
	}
	ferryBinary(t)
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	e := &opsEnv{t: t, name: "ferry_ops_" + hex.EncodeToString(b), chURL: chURL}
	var err error
	if e.admin, err = pgx.Connect(ctx, base); err != nil {
		t.Fatalf("connect to the stack's PostgreSQL: %v", err)
	}
	t.Cleanup(e.cleanup)
	e.adminExec("CREATE ROLE "+e.name+" LOGIN REPLICATION PASSWORD '"+testPassword+"'",
		"CREATE DATABASE "+e.name+" OWNER "+e.name)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(e.name, testPassword)
	u.Path = "/" + e.name
	e.pgURL = u.String()
	if e.pg, err = pgx.Connect(ctx, e.pgURL); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *opsEnv) adminExec(stmts ...string) {
	e.t.Helper()
	for _, s := range stmts {
		if _, err := e.admin.Exec(context.Background(), s); err != nil {
			e.t.Fatalf("%s: %v", s, err)
		}
	}
}

func (e *opsEnv) exec(stmts ...string) {
	e.t.Helper()
	for _, s := range stmts {
		if _, err := e.pg.Exec(context.Background(), s); err != nil {
			e.t.Fatalf("%s: %v", s, err)
		}
	}
}

func (e *opsEnv) cleanup() {
	ctx := context.Background()
	if e.pg != nil {
		e.pg.Close(ctx)
	}
	for i := 0; i < 50; i++ {
		_, err := e.admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, e.name)
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, s := range []string{"DROP DATABASE IF EXISTS " + e.name + " WITH (FORCE)", "DROP ROLE IF EXISTS " + e.name} {
		if _, err := e.admin.Exec(ctx, s); err != nil {
			e.t.Logf("%s: %v", s, err)
		}
	}
	e.admin.Close(ctx)
	if err := e.chExec("DROP DATABASE IF EXISTS " + e.name); err != nil {
		e.t.Logf("drop ClickHouse database: %v", err)
	}
}

// args are the connection flags of this env.
func (e *opsEnv) args(cmd ...string) []string {
	return append(cmd, "--pg", e.pgURL, "--ch", e.chURL, "--slot", e.name)
}

// ferry runs the binary to completion and returns its combined output.
func (e *opsEnv) ferry(args ...string) (string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// start runs the binary in the background; stop sends SIGTERM and returns
// its output and exit error.
func (e *opsEnv) start(args ...string) (stop func() (string, error)) {
	e.t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = cleanEnv()
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var once sync.Once
	var err error
	stop = func() (string, error) {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err = <-done:
			case <-time.After(35 * time.Second):
				_ = cmd.Process.Kill()
				err = <-done
				e.t.Errorf("ferry did not stop within 35 s of the signal")
			}
		})
		return out.String(), err
	}
	e.t.Cleanup(func() { _, _ = stop() })
	return stop
}

// cleanEnv is the environment without ferry's variables, so flags decide;
// but FERRY_STREAMING stays, so that the suite can run with streaming on
// or off.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FERRY_") || strings.HasPrefix(kv, "FERRY_STREAMING=") {
			env = append(env, kv)
		}
	}
	return env
}

// chConn opens a connection to the env's ClickHouse; the caller closes it.
func (e *opsEnv) chConn() (driver.Conn, error) {
	opts, err := ch.ParseDSN(e.chURL)
	if err != nil {
		return nil, err
	}
	return ch.Open(opts)
}

func (e *opsEnv) chExec(q string) error {
	conn, err := e.chConn()
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Exec(context.Background(), q)
}

// freeAddr returns a local address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
