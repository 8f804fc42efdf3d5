package replicator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

// TestRecopyAfterDecoderFailure: PostgreSQL's decoder failing inside the
// server (XX000; feigned, as a real server fails so only by chance: ferry
// torture met "could not map filenode" at the first decode from a slot
// made while sessions ran DDL) right after the initial copy makes ferry
// copy every table again from a new slot, and the catch-up ends with
// ClickHouse equal to PostgreSQL. Once ferry has confirmed past the copy,
// the same failure ends the run, naming the slot and the way out.
func TestRecopyAfterDecoderFailure(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id bigint PRIMARY KEY, v text)`,
		`INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 500) g`)
	logs, seen := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))
	cfg.CatchUp = true
	run := func(failures int) error {
		s := e.sink()
		r, err := replicator.New(cfg, s, s, s.Capabilities(), clickhouse.IsRetryable)
		if err != nil {
			t.Fatal(err)
		}
		replicator.FeignDecoderFailures(r, failures)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		return r.Run(ctx)
	}
	const recopied = "PostgreSQL's decoder failed before ferry confirmed anything past the initial copy: copying every table again from a new slot"
	if err := run(1); err != nil {
		t.Fatalf("the first start, whose first decode fails: %v", err)
	}
	if n := seen.FilterMessage(recopied).Len(); n != 1 {
		t.Errorf("logged %d times that every table is copied again, want 1", n)
	}
	if n := seen.FilterMessage("the slot's initial copy did not finish: dropping the slot to copy again").Len(); n != 1 {
		t.Errorf("dropped the slot %d times, want 1", n)
	}
	if got := e.verifyAll(cfg)["public.items"]; got != 500 {
		t.Errorf("%d rows after the copy made again, want 500", got)
	}

	e.exec(`UPDATE items SET v = v || '!' WHERE id <= 100`, `DELETE FROM items WHERE id > 450`)
	if err := run(0); err != nil {
		t.Fatalf("catch up past the copy: %v", err)
	}
	err := run(1)
	if err == nil || !strings.Contains(err.Error(), "pg_drop_replication_slot('"+cfg.Slot+"')") || !strings.Contains(err.Error(), "could not map filenode") {
		t.Fatalf("a decoder failure after ferry confirmed past the copy: %v, want the error naming the slot and the way out", err)
	}
	if n := seen.FilterMessage(recopied).Len(); n != 1 {
		t.Errorf("copied every table again after ferry had confirmed past the copy (%d copies made again in all)", n)
	}
	if got := e.verifyAll(cfg)["public.items"]; got != 450 {
		t.Errorf("%d rows, want 450", got)
	}
}
