package replicator_test

import (
	"net/url"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// TestSilentServer black-holes ferry's connections to PostgreSQL while a
// writer writes: ferry must notice that the walsender stopped answering,
// connect again, and end with ClickHouse equal to PostgreSQL.
func TestSilentServer(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL)`,
		`INSERT INTO items SELECT g, 0 FROM generate_series(1, 1000) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)

	u, err := url.Parse(e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	bh, err := testkit.StartProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bh.Close)
	u.Host = bh.Addr()
	// The walsender of a held connection hears nothing either: a short
	// timeout of its own ends it soon, and frees the slot for the new one.
	q := u.Query()
	q.Set("options", "-cwal_sender_timeout=3s")
	u.RawQuery = q.Encode()
	logs, seen := observer.New(zapcore.WarnLevel)
	cfg.ConnString = u.String()
	cfg.StandbyInterval = 300 * time.Millisecond
	cfg.ServerSilence = 2 * time.Second
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))
	stop := e.streamInBackground(cfg)

	write := func(from, to int) {
		for i := from; i < to; i++ {
			e.exec(`INSERT INTO items VALUES (` + strconv.Itoa(i) + `, 1) ON CONFLICT (id) DO UPDATE SET v = items.v + 1`)
		}
	}
	live := func(n string) func() bool {
		return func() bool {
			rows := e.chStrings("SELECT toString(count()) FROM " + e.table("items") + " FINAL WHERE _ferry_deleted = 0 AND id >= 2000")
			return len(rows) == 1 && rows[0][0] == n
		}
	}
	write(2000, 2100)
	// Streaming, not still starting: the silence check covers the stream.
	testkit.WaitFor(t, time.Minute, "items rows 2000-2099 in ClickHouse", live("100"))
	bh.Hold()
	write(2100, 2300)
	deadline := time.Now().Add(2 * time.Minute)
	for seen.FilterMessage("connection lost; starting again from the last confirmed position").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("ferry did not notice in 2 minutes that the server went silent")
		}
		time.Sleep(100 * time.Millisecond)
	}
	write(2300, 2400)
	testkit.WaitFor(t, time.Minute, "items rows 2000-2399 in ClickHouse", live("400"))
	stop()
	if counts := e.verifyAll(cfg); counts["public.items"] != 1400 {
		t.Errorf("items: %d rows, want 1400", counts["public.items"])
	}
}
