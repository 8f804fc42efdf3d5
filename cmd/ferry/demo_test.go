package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	name := demoTestName(t, pgURL, chURL)
	for _, dur := range []time.Duration{2 * time.Second, time.Second} {
		var out bytes.Buffer
		c := &demoCmd{connFlags: connFlags{PG: pgURL, CH: chURL}, Orders: 3000, WritesPerSec: 100, Duration: dur, name: name}
		if err := runDemo(ctx, c, zap.NewNop(), &out); err != nil {
			t.Fatalf("demo: %v\n%s", err, out.String())
		}
		for _, want := range []string{"Full results identical: yes", "[5/5]"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	}
	dbURL, err := withDatabase(pgURL, name)
	if err != nil {
		t.Fatal(err)
	}
	compareDemo(ctx, t, dbURL, chURL, name)
}

// TestDemoFollow runs the demo with --follow and stops it as Ctrl-C would:
// it must stream until then, stop cleanly and leave both sides equal.
func TestDemoFollow(t *testing.T) {
	pgURL, chURL := os.Getenv("FERRY_PG_URL"), os.Getenv("FERRY_CH_URL")
	if pgURL == "" || chURL == "" {
		t.Skip("FERRY_PG_URL and FERRY_CH_URL are not set (make stack-up; . .stack/env)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := &testkit.Buffer{}
	runCtx, interrupt := context.WithCancel(ctx)
	name := demoTestName(t, pgURL, chURL)
	c := &demoCmd{connFlags: connFlags{PG: pgURL, CH: chURL}, Orders: 3000, WritesPerSec: 100, Follow: true, name: name}
	done := make(chan error, 1)
	go func() { done <- runDemo(runCtx, c, zap.NewNop(), out) }()
	// Two progress lines (every 2 s) after the initial copy, then "Ctrl-C".
	for deadline := time.Now().Add(5 * time.Minute); strings.Count(out.String(), "\n") < 12 || !strings.Contains(out.String(), "until Ctrl-C"); {
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
	dbURL, err := withDatabase(pgURL, name)
	if err != nil {
		t.Fatal(err)
	}
	d := &demo{cfg: c, out: io.Discard, log: zap.NewNop(), dbURL: dbURL}
	defer d.close()
	if err := d.connect(ctx); err != nil {
		t.Fatal(err)
	}
	if d.sink, err = clickhouse.New(ctx, clickhouse.Config{DSN: chURL, Database: name}); err != nil {
		t.Fatal(err)
	}
	if err := d.replicate(ctx, true); err != nil {
		t.Fatal(err)
	}
	compareDemo(ctx, t, dbURL, chURL, name)
}

// demoTestName is a name of the demo's databases, slot and publication
// that no other run shares (a ferry demo, another test), dropped at the
// end.
func demoTestName(t *testing.T, pgURL, chURL string) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := demoName + "_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		if admin, err := pgx.Connect(ctx, pgURL); err == nil {
			if err := dropSlot(ctx, admin, name); err != nil {
				t.Log(err)
			}
			if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				t.Log(err)
			}
			admin.Close(ctx)
		}
		if opts, err := ch.ParseDSN(chURL); err == nil {
			if conn, err := ch.Open(opts); err == nil {
				if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
					t.Log(err)
				}
				conn.Close()
			}
		}
	})
	return name
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
		// 26.7's toString drops a decimal's trailing zeros (516578.4 for
		// PostgreSQL's 516578.40): the same value.
		if plainDecimal(want) != plainDecimal(got) {
			t.Errorf("%s: PostgreSQL %s, ClickHouse %s (%s)", q.table, want, got, q.pg)
		}
		t.Logf("%s: %s", q.pg, want)
	}
}

// compareDemo checks that the demo's PostgreSQL and ClickHouse databases
// hold the same rows.
func compareDemo(ctx context.Context, t *testing.T, dbURL, chURL, name string) {
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
	opts.Auth.Database = name
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	checkSameRows(ctx, t, pg, conn)
}
