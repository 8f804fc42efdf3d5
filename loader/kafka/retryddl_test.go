package kafka_test

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
)

// cutAfterAlter is the publisher with a connection lost at the first write
// after an in-place schema change was published and its state saved, so
// that the replicator's next attempt, in the same process, replays the
// change from the slot's confirmed position, which is before it.
type cutAfterAlter struct {
	*kafka.Sink
	altered, cut atomic.Bool
}

func (c *cutAfterAlter) AlterTable(ctx context.Context, tm *schema.TableMap, changes []schema.ColumnChange) error {
	err := c.Sink.AlterTable(ctx, tm, changes)
	if err == nil {
		c.altered.Store(true)
	}
	return err
}

func (c *cutAfterAlter) Write(ctx context.Context, b *loader.Batch) error {
	if c.altered.Load() && !c.cut.Swap(true) {
		return &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return c.Sink.Write(ctx, b)
}

// TestRetryAfterInPlaceChange: the publisher loses its connection right
// after an in-place ADD COLUMN of a partitioned table went out, and starts
// again in the same process from the slot's confirmed position, before the
// change; every row of the table, before and after the change, reaches
// ClickHouse through the loader.
func TestRetryAfterInPlaceChange(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE parts (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)`,
		`CREATE TABLE parts_a PARTITION OF parts FOR VALUES FROM (0) TO (1000)`,
		`CREATE TABLE parts_b PARTITION OF parts FOR VALUES FROM (1000) TO (100000)`,
		`INSERT INTO parts SELECT g, 'v' || g FROM generate_series(1, 50) g`)
	if err := replicator.Setup(context.Background(), e.pgURL, "ferry"); err != nil { // DDL capture: ADD COLUMN goes in place
		t.Fatal(err)
	}
	slot := e.db + "_k"
	e.publish(slot, 2)
	pub, err := kafka.New(kafka.Config{Client: e.client(), Database: e.db, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	cut := &cutAfterAlter{Sink: pub}
	stop := e.inBackground(slot, cut, cut, pub.Capabilities(), kafka.IsRetryable)
	e.exec(`INSERT INTO parts SELECT g, 'before' FROM generate_series(51, 60) g`,
		`ALTER TABLE parts ADD COLUMN x text`,
		`INSERT INTO parts SELECT g, 'after', 'x' || g FROM generate_series(1001, 1100) g`,
		`UPDATE parts SET x = 'updated' WHERE id % 5 = 0`)
	deadline := time.Now().Add(30 * time.Second)
	for !cut.cut.Load() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !cut.cut.Load() {
		stop()
		t.Fatal("no write followed the in-place change: the test did not set up what it tests")
	}
	time.Sleep(3 * time.Second) // the next attempt starts after a second
	stop()
	e.publish(slot, 2)
	dest := e.chSink("_kafka")
	if err := e.load(dest, "retry-ddl", 0); err != nil {
		t.Fatalf("load: %v", err)
	}
	e.verifyAll(dest)
}
