package kafka_test

import (
	"context"
	"testing"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
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

// dyingAfterAlter fails its first write after an in-place change.
type dyingAfterAlter struct {
	*clickhouse.Sink
	altered bool
}

func (d *dyingAfterAlter) AlterTable(ctx context.Context, tm *schema.TableMap, changes []schema.ColumnChange) error {
	d.altered = true
	return d.Sink.AlterTable(ctx, tm, changes)
}

func (d *dyingAfterAlter) Write(ctx context.Context, b *loader.Batch) error {
	if d.altered {
		return errKilled
	}
	return d.Sink.Write(ctx, b)
}

// TestLoaderRestartAfterInPlaceChange restarts a loader right after it
// altered its table, while other partitions still hold rows of the older
// description: the next loader knows its table's description and reads
// those rows into it.
func TestLoaderRestartAfterInPlaceChange(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`,
		`INSERT INTO items SELECT g, 'old' FROM generate_series(1, 3000) g`)
	if err := replicator.Setup(context.Background(), e.pgURL, "ferry"); err != nil {
		t.Fatal(err)
	}
	slot := e.db + "_k"
	e.publish(slot, 3)
	e.exec(`UPDATE items SET v = 'updated' WHERE id % 2 = 0`, `ALTER TABLE items ADD COLUMN c int`,
		`UPDATE items SET c = id WHERE id % 3 = 0`, `INSERT INTO items SELECT g, 'new', g FROM generate_series(3001, 4000) g`)
	e.publish(slot, 3)

	sink := e.chSink("_crash")
	if err := e.load(&dyingAfterAlter{Sink: sink}, "alter-loader", 100); err == nil {
		t.Fatal("the first loader should have died")
	}
	if err := e.load(sink, "alter-loader", 100); err != nil {
		t.Fatalf("load after the crash: %v", err)
	}
	e.verifyAll(sink)
}

// TestTableJoinsPublicationWhileStopped adds a table to the publication
// while ferry run --sink kafka is stopped: the next start copies it onto
// its topic, as the direct path copies a table ClickHouse lacks. It used
// to publish only its later changes (the Kafka sink reports every table
// present), so the rows it held were never loaded (ferry torture seed 20,
// Kafka path, publication changes).
func TestTableJoinsPublicationWhileStopped(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text)`, `CREATE TABLE b (id int PRIMARY KEY, v text)`,
		`INSERT INTO a VALUES (1, 'a')`, `INSERT INTO b SELECT g, repeat('b', 3000) || g FROM generate_series(1, 50) g`,
		`ALTER TABLE b ALTER COLUMN v SET STORAGE EXTERNAL`,
		`CREATE PUBLICATION ferry FOR TABLE a WITH (publish_via_partition_root = true)`)
	slot := e.db + "_k"
	e.publish(slot, 2)
	// The update leaves v, TOASTed, unchanged: its value is the copy's.
	e.exec(`ALTER PUBLICATION ferry ADD TABLE b`, `UPDATE b SET id = id + 1000 WHERE id <= 5`, `INSERT INTO a VALUES (2, 'a')`)
	e.publish(slot, 2)
	onB := func() int {
		n := 0
		for _, r := range readTopics(t, e.brokers, "it") {
			if r.topic == "it.public.b" {
				n++
			}
		}
		return n
	}
	published := onB()
	e.publish(slot, 2) // a restart with nothing new copies nothing again
	if again := onB(); again != published {
		t.Errorf("a restart with nothing new published %d messages on b's topic", again-published)
	}

	sink := e.chSink("_kafka")
	if err := e.load(sink, "join-loader", 0); err != nil {
		t.Fatalf("load: %v", err)
	}
	e.verifyAll(sink)
}
