package kafka_test

import (
	"context"
	"testing"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/schema"
)

// dyingAfterTruncate fails its first write after the first truncation
// past the initial copy's, as a loader killed right after it applied a
// truncation would: the other partitions have not all delivered theirs.
type dyingAfterTruncate struct {
	*clickhouse.Sink
	truncations int
}

func (d *dyingAfterTruncate) Truncate(ctx context.Context, tm *schema.TableMap) error {
	d.truncations++
	return d.Sink.Truncate(ctx, tm)
}

func (d *dyingAfterTruncate) Write(ctx context.Context, b *loader.Batch) error {
	if d.truncations >= 1 { // the copy's truncation creates the table; this is the TRUNCATE
		return errKilled
	}
	return d.Sink.Write(ctx, b)
}

// TestLoaderRestartAcrossTruncation restarts a loader after it applied a
// truncation that some partitions had not delivered yet: the next loader
// neither applies it again (which would remove rows written after it) nor
// writes the rows that came before it on the partitions behind.
func TestLoaderRestartAcrossTruncation(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`,
		`INSERT INTO items SELECT g, 'old' FROM generate_series(1, 3000) g`)
	slot := e.db + "_k"
	e.publish(slot, 3)
	e.exec(`UPDATE items SET v = 'updated' WHERE id % 2 = 0`, `TRUNCATE items`,
		`INSERT INTO items SELECT g, 'new' FROM generate_series(2001, 6000) g`)
	e.publish(slot, 3)

	sink := e.chSink("_crash")
	if err := e.load(&dyingAfterTruncate{Sink: sink}, "trunc-loader", 100); err == nil {
		t.Fatal("the first loader should have died")
	}
	if err := e.load(sink, "trunc-loader", 100); err != nil {
		t.Fatalf("load after the crash: %v", err)
	}
	e.verifyAll(sink)
}
