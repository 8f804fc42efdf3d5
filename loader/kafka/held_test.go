package kafka_test

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
)

// cutAfterFirstWrite is the publisher with a connection lost right after
// the initial copy's first batch went out: its latest row is held back
// (see kafka's releaseHeld), and the test deletes that row in PostgreSQL
// before the replicator's next attempt copies every table again.
type cutAfterFirstWrite struct {
	*kafka.Sink
	e    *env
	done bool
}

func (c *cutAfterFirstWrite) Write(ctx context.Context, b *loader.Batch) error {
	if err := c.Sink.Write(ctx, b); err != nil || c.done || len(b.Rows) == 0 {
		return err
	}
	c.done = true
	last := b.Rows[len(b.Rows)-1].Values[0]
	c.e.exec(fmt.Sprintf("DELETE FROM items WHERE id = %v", last))
	c.e.t.Logf("the copy's first batch went out holding back id %v, now deleted; cutting the connection", last)
	return &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
}

// TestHeldRowOfAbandonedCopy: an initial copy cut short and made again in
// the same process (a lost connection) still holds the row the first copy
// held back, and publishes it before the new copy's first truncation
// (marker), which the new copy of its table follows. Published after it,
// that row of the old snapshot would come back in ClickHouse although
// PostgreSQL deleted it since (seen with marker's release taken out).
func TestHeldRowOfAbandonedCopy(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`, `INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 10) g`)
	s, err := kafka.New(kafka.Config{Client: e.client(), Database: e.db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cut := &cutAfterFirstWrite{Sink: s, e: e}
	r, err := replicator.New(e.config("held"), cut, cut, s.Capabilities(), kafka.IsRetryable)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the publisher did not catch up within a minute")
	}
	if !cut.done {
		t.Fatal("no batch was written: the test did not set up what it tests")
	}
	dest := e.chSink("_kafka")
	if err := e.load(dest, "held", 0); err != nil {
		t.Fatalf("load: %v", err)
	}
	e.verifyAll(dest)
}
