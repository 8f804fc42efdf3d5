package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
)

// TestDemo runs the demo twice with tiny sizes against the local stack (the
// second run must start over cleanly) and checks that both sides hold the
// same rows.
func TestDemo(t *testing.T) {
	pgURL, chURL := os.Getenv("FERRY_PG_URL"), os.Getenv("FERRY_CH_URL")
	if pgURL == "" || chURL == "" {
		t.Skip("FERRY_PG_URL and FERRY_CH_URL are not set (make stack-up; . .stack/env)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, dur := range []time.Duration{2 * time.Second, time.Second} {
		var out bytes.Buffer
		c := &demoCmd{connFlags: connFlags{PG: pgURL, CH: chURL}, Orders: 3000, WritesPerSec: 100, Duration: dur}
		if err := runDemo(ctx, c, zap.NewNop(), &out); err != nil {
			t.Fatalf("demo: %v\n%s", err, out.String())
		}
		for _, want := range []string{"Full results identical: yes", "[5/5]"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	}
	dbURL, err := withDatabase(pgURL, demoName)
	if err != nil {
		t.Fatal(err)
	}
	compareDemo(ctx, t, dbURL, chURL)
}

// TestDemoFollow runs the demo with --follow and stops it as Ctrl-C would:
// it must stream until then, stop cleanly and leave both sides equal.
func TestDemoFollow(t *testing.T) {
	pgURL, chURL := os.Getenv("FERRY_PG_URL"), os.Getenv("FERRY_CH_URL")
	if pgURL == "" || chURL == "" {
		t.Skip("FERRY_PG_URL and FERRY_CH_URL are not set (make stack-up; . .stack/env)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := &testkit.Buffer{}
	runCtx, interrupt := context.WithCancel(ctx)
	c := &demoCmd{connFlags: connFlags{PG: pgURL, CH: chURL}, Orders: 3000, WritesPerSec: 100, Follow: true}
	done := make(chan error, 1)
	go func() { done <- runDemo(runCtx, c, zap.NewNop(), out) }()
	// Two progress lines (every 2 s) after the initial copy, then "Ctrl-C".
	for deadline := time.Now().Add(45 * time.Second); strings.Count(out.String(), "\n") < 12 || !strings.Contains(out.String(), "until Ctrl-C"); {
		if time.Now().After(deadline) {
			t.Fatalf("no progress:\n%s", out.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(4500 * time.Millisecond)
	interrupt()
	if err := <-done; err != nil {
		t.Fatalf("demo --follow: %v\n%s", err, out.String())
	}
	for _, want := range []string{"[5/5] Stopped after", "Look around:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "Full results identical") {
		t.Errorf("--follow ran the comparison:\n%s", out.String())
	}
	t.Log(out.String())
	// After the stop, a catch-up brings ClickHouse level with PostgreSQL.
	dbURL, err := withDatabase(pgURL, demoName)
	if err != nil {
		t.Fatal(err)
	}
	d := &demo{cfg: c, out: io.Discard, log: zap.NewNop(), dbURL: dbURL}
	defer d.close()
	if err := d.connect(ctx); err != nil {
		t.Fatal(err)
	}
	if d.sink, err = clickhouse.New(ctx, clickhouse.Config{DSN: chURL, Database: demoName}); err != nil {
		t.Fatal(err)
	}
	if err := d.replicate(ctx, true); err != nil {
		t.Fatal(err)
	}
	compareDemo(ctx, t, dbURL, chURL)
}

// checkSameRows compares row counts and the sum of the orders' totals.
func checkSameRows(ctx context.Context, t *testing.T, pg *pgx.Conn, conn ch.Conn) {
	t.Helper()
	for _, q := range []struct{ table, pg, ch string }{
		{"customers", "SELECT count(*)::text FROM customers", "SELECT toString(count()) FROM customers FINAL WHERE _ferry_deleted = 0"},
		{"orders", "SELECT count(*)::text FROM orders", "SELECT toString(count()) FROM orders FINAL WHERE _ferry_deleted = 0"},
		{"orders", "SELECT sum(total)::text FROM orders", "SELECT toString(assumeNotNull(sum(total))) FROM orders FINAL WHERE _ferry_deleted = 0"},
		{"orders", "SELECT count(*)::text FROM orders WHERE status = 'pending'", "SELECT toString(count()) FROM orders FINAL WHERE _ferry_deleted = 0 AND status = 'pending'"},
	} {
		var want, got string
		if err := pg.QueryRow(ctx, q.pg).Scan(&want); err != nil {
			t.Fatalf("PostgreSQL: %s: %v", q.pg, err)
		}
		if err := conn.QueryRow(ctx, q.ch).Scan(&got); err != nil {
			t.Fatalf("ClickHouse: %s: %v", q.ch, err)
		}
		if want != got {
			t.Errorf("%s: PostgreSQL %s, ClickHouse %s (%s)", q.table, want, got, q.pg)
		}
		t.Logf("%s: %s", q.pg, want)
	}
}

// compareDemo checks that the demo's PostgreSQL and ClickHouse databases
// hold the same rows.
func compareDemo(ctx context.Context, t *testing.T, dbURL, chURL string) {
	t.Helper()
	pg, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	opts, err := ch.ParseDSN(chURL)
	if err != nil {
		t.Fatal(err)
	}
	opts.Auth.Database = demoName
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	checkSameRows(ctx, t, pg, conn)
}
