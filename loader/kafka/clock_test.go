package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
)

// publishAt is publish with the publisher's clock at a given time.
func (e *env) publishAt(slot string, at time.Time) {
	e.t.Helper()
	s, err := kafka.New(kafka.Config{Client: e.client(), Database: e.db, Partitions: 2, Clock: func() time.Time { return at }})
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close()
	r, err := replicator.New(e.config(slot), s, s, s.Capabilities(), kafka.IsRetryable)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
}

// TestTruncationAfterClockStepBack restarts the publisher with its clock a
// year behind: a TRUNCATE published then must still reach ClickHouse, not
// be taken by the loader for one it applied already.
func TestTruncationAfterClockStepBack(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`,
		`INSERT INTO items SELECT g, 'old' FROM generate_series(1, 500) g`)
	slot := e.db + "_k"
	clock := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	e.publishAt(slot, clock)
	sink := e.chSink("_kafka")
	if err := e.load(sink, "clock-loader", 100); err != nil {
		t.Fatal(err)
	}
	e.verifyAll(sink)

	e.exec(`TRUNCATE items`, `INSERT INTO items SELECT g, 'new' FROM generate_series(401, 450) g`)
	e.publishAt(slot, clock.AddDate(-1, 0, 0))
	if err := e.load(sink, "clock-loader", 100); err != nil {
		t.Fatal(err)
	}
	e.verifyAll(sink)
}
