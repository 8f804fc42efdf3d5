package replicator_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap/zaptest"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
	"github.com/ferry-cdc/ferry/verify"
)

// env is one test's private PostgreSQL database, ClickHouse database and
// slot on the local stack. The database belongs to a role of the same
// name with REPLICATION and no superuser: the role ferry runs as (pgURL),
// and the one that e.exec creates the tables as. adminURL reaches the
// database as the server's superuser, for what only one may do.
type env struct {
	t        *testing.T
	base     string // the server's admin URL
	db       string
	pgURL    string // the test database, as the role
	adminURL string // the test database, as the superuser
	chURL    string
	slot     string
	pg       *pgx.Conn // as the role
	ch       driver.Conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvAt(t, os.Getenv("FERRY_PG_URL"))
}

// newEnvAt is newEnv on another PostgreSQL server.
func newEnvAt(t *testing.T, base string) *env {
	t.Helper()
	chURL := os.Getenv("FERRY_CH_URL")
	if base == "" || chURL == "" {
		t.Skip("FERRY_PG_URL and FERRY_CH_URL are not set: run `make stack-up` and `. .stack/env` (make test does both)")
	}
	ctx := context.Background()
	e := &env{t: t, db: "ferry_it_" + randomHex(4), chURL: chURL, base: base}
	e.slot = e.db
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", base, err)
	}
	defer admin.Close(ctx)
	// pg_read_all_stats is for the tests' own look at pg_stat_replication;
	// ferry does not need it (TestLeastPrivilegeRole runs without it).
	for _, s := range []string{"CREATE ROLE " + e.db + " LOGIN REPLICATION IN ROLE pg_read_all_stats", "CREATE DATABASE " + e.db + " OWNER " + e.db} {
		if _, err := admin.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + e.db
	e.adminURL = u.String()
	u.User = url.User(e.db)
	e.pgURL = u.String()
	if e.pg, err = pgx.Connect(ctx, e.pgURL); err != nil {
		t.Fatal(err)
	}
	opts, err := ch.ParseDSN(chURL)
	if err != nil {
		t.Fatal(err)
	}
	if e.ch, err = ch.Open(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cleanup)
	return e
}

func (e *env) cleanup() {
	ctx := context.Background()
	e.pg.Close(ctx)
	if admin, err := pgx.Connect(ctx, e.base); err == nil {
		// The slot may still be held for a moment by a walsender that is
		// shutting down.
		for i := 0; i < 50; i++ {
			_, err = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, e.slot)
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			e.t.Logf("drop slot %s: %v", e.slot, err)
		}
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+e.db+" WITH (FORCE)"); err != nil {
			e.t.Logf("drop database %s: %v", e.db, err)
		}
		if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+e.db); err != nil {
			e.t.Logf("drop role %s: %v", e.db, err)
		}
		admin.Close(ctx)
	}
	if err := e.ch.Exec(ctx, "DROP DATABASE IF EXISTS "+e.db); err != nil {
		e.t.Logf("drop ClickHouse database %s: %v", e.db, err)
	}
	e.ch.Close()
}

// exec runs SQL statements in the test database.
func (e *env) exec(stmts ...string) {
	e.t.Helper()
	for _, s := range stmts {
		if _, err := e.pg.Exec(context.Background(), s); err != nil {
			e.t.Fatalf("%s: %v", s, err)
		}
	}
}

// adminExec runs SQL statements in the test database as the superuser.
func (e *env) adminExec(stmts ...string) {
	e.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			e.t.Fatalf("%s: %v", s, err)
		}
	}
}

// config is a replicator.Config for this env. FERRY_STREAMING (on, off,
// auto) chooses whether transactions in progress are streamed, here as in
// the ferry binary that some tests start.
func (e *env) config() replicator.Config {
	return replicator.Config{ConnString: e.pgURL, Slot: e.slot, Publication: "ferry", Logger: zaptest.NewLogger(e.t),
		Streaming: os.Getenv("FERRY_STREAMING")}
}

// sink opens a ClickHouse sink on the env's database.
func (e *env) sink() *clickhouse.Sink {
	e.t.Helper()
	s, err := clickhouse.New(context.Background(), clickhouse.Config{DSN: e.chURL, Database: e.db})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// catchUp runs ferry until everything committed so far is in ClickHouse.
func (e *env) catchUp(cfg replicator.Config) error {
	e.t.Helper()
	cfg.CatchUp = true
	s := e.sink()
	r, err := replicator.New(cfg, s, s, s.Capabilities(), clickhouse.IsRetryable)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return r.Run(ctx)
}

// faultySink is a ClickHouse sink with a fault of a test's own.
type faultySink interface {
	loader.Sink
	loader.SnapshotStore
	Capabilities() schema.Capabilities
}

// catchUpThrough runs ferry until caught up, writing through s, and
// returns how the run ended.
func (e *env) catchUpThrough(cfg replicator.Config, s faultySink) error {
	e.t.Helper()
	cfg.CatchUp = true
	r, err := replicator.New(cfg, s, s, s.Capabilities(), clickhouse.IsRetryable)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return r.Run(ctx)
}

func (e *env) mustCatchUp(cfg replicator.Config) {
	e.t.Helper()
	if err := e.catchUp(cfg); err != nil {
		e.t.Fatalf("catch up: %v", err)
	}
}

// verifyAll asserts that every replicated table holds the same rows on
// both sides, and returns the row count per table.
func (e *env) verifyAll(cfg replicator.Config) map[string]uint64 {
	e.t.Helper()
	s := e.sink()
	ctx := context.Background()
	tms, err := replicator.Tables(ctx, cfg, s.Capabilities())
	if err != nil {
		e.t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, tm := range tms {
		width, err := s.ScanColumns(ctx, tm)
		if err != nil {
			e.t.Fatal(err)
		}
		res, err := verify.Table(ctx, tm, func(ctx context.Context, tm *schema.TableMap, fn func([]any) error) error {
			return replicator.ScanTable(ctx, e.pgURL, tm, fn)
		}, s.ScanLiveColumns, verify.Config{DestColumns: width})
		if err != nil {
			e.t.Fatal(err)
		}
		if !res.Match {
			e.t.Errorf("%s differs: %d rows in PostgreSQL, %d in ClickHouse: %v", res.Table, res.SourceRows, res.DestRows, res.Differences)
		}
		counts[res.Table] = res.SourceRows
	}
	return counts
}

// chStrings runs a ClickHouse query whose columns are all strings.
func (e *env) chStrings(query string) [][]string {
	e.t.Helper()
	rows, err := e.ch.Query(context.Background(), query)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out [][]string
	n := len(rows.Columns())
	for rows.Next() {
		vals := make([]string, n)
		ptrs := make([]any, n)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			e.t.Fatalf("%s: %v", query, err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return out
}

// pgStrings runs a PostgreSQL query and returns its rows as text.
func (e *env) pgStrings(query string) [][]string {
	e.t.Helper()
	rows, err := e.pg.Query(context.Background(), query, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		raw := rows.RawValues()
		vals := make([]string, len(raw))
		for i, r := range raw {
			if r == nil {
				vals[i] = `\N`
			} else {
				vals[i] = string(r)
			}
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return out
}

func (e *env) table(name string) string { return "`" + e.db + "`.`" + name + "`" }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func sameRows(t *testing.T, what string, got, want [][]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got  %s\n want %s", what, trim(fmt.Sprint(got)), trim(fmt.Sprint(want)))
	}
}

func trim(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return strings.TrimSpace(s)
}

func errorAs(err error, target any) bool { return errors.As(err, target) }

// chHasTable tells whether the env's ClickHouse database has the table.
// (EXISTS TABLE, not system.tables: ClickHouse 18.16 fails a read of
// system.tables that meets a table being dropped or renamed.)
func (e *env) chHasTable(name string) bool {
	e.t.Helper()
	var exists uint8
	if err := e.ch.QueryRow(context.Background(), "EXISTS TABLE "+e.table(name)).Scan(&exists); err != nil {
		e.t.Fatalf("EXISTS TABLE %s: %v", e.table(name), err)
	}
	return exists == 1
}

// background is a ferry run in the background (see runInBackground).
type background struct {
	t    *testing.T
	done chan error // receives how the run ended
	stop context.CancelFunc
}

// runInBackground starts ferry with cfg, writing through s, until ctx ends
// or the run is stopped.
func (e *env) runInBackground(ctx context.Context, cfg replicator.Config, s faultySink) *background {
	e.t.Helper()
	r, err := replicator.New(cfg, s, s, s.Capabilities(), clickhouse.IsRetryable)
	if err != nil {
		e.t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	e.t.Cleanup(stop)
	b := &background{t: e.t, done: make(chan error, 1), stop: stop}
	go func() { b.done <- r.Run(runCtx) }()
	return b
}

// alive fails the test when the run has ended.
func (b *background) alive() {
	b.t.Helper()
	select {
	case err := <-b.done:
		b.t.Fatalf("ferry stopped: %v", err)
	default:
	}
}

// end stops the run and fails the test when it ended with an error.
func (b *background) end() {
	b.t.Helper()
	b.stop()
	if err := <-b.done; err != nil {
		b.t.Fatalf("run: %v", err)
	}
}
