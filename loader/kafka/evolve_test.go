package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
)

// inBackground runs a replicator into sink until the returned stop is
// called, which fails the test if the run failed.
func (e *env) inBackground(slot string, sink loader.Sink, store loader.SnapshotStore, caps schema.Capabilities, retry func(error) bool) (stop func()) {
	e.t.Helper()
	cfg := e.config(slot)
	cfg.CatchUp, cfg.StandbyInterval = false, time.Second
	r, err := replicator.New(cfg, sink, store, caps, retry)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Fatalf("%s: %v", slot, err)
		}
	}
}

// writer keeps inserting and updating rows of a table until stopped,
// following it through a rename.
type writer struct {
	e       *env
	mu      sync.Mutex
	name    string
	stop    chan struct{}
	done    chan struct{}
	written atomic.Int64
}

func (e *env) startWriter(table string, from int) *writer {
	w := &writer{e: e, name: table, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run(from)
	return w
}

func (w *writer) renamed(to string) {
	w.mu.Lock()
	w.name = to
	w.mu.Unlock()
}

func (w *writer) run(from int) {
	defer close(w.done)
	conn, err := pgx.Connect(context.Background(), w.e.pgURL)
	if err != nil {
		w.e.t.Error(err)
		return
	}
	defer conn.Close(context.Background())
	for i := from; ; i++ {
		select {
		case <-w.stop:
			return
		default:
		}
		w.mu.Lock()
		name := w.name
		w.mu.Unlock()
		_, err := conn.Exec(context.Background(), fmt.Sprintf(`INSERT INTO %s (id, a) VALUES (%d, %d);
			UPDATE %s SET a = a + 1 WHERE id = %d; DELETE FROM %s WHERE id = %d`, name, i, i, name, i%97+1, name, i-5))
		var pe *pgconn.PgError
		switch {
		case err == nil:
			w.written.Add(1)
		case errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "40P01"):
			time.Sleep(5 * time.Millisecond) // renamed under us, or a deadlock with the DDL: go on
		default:
			w.e.t.Errorf("writer: %v", err)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (w *writer) finish() int64 {
	close(w.stop)
	<-w.done
	return w.written.Load()
}

// TestKafkaSchemaChanges runs, while rows flow, the schema changes the
// direct path applies by rebuilding or renaming the ClickHouse table,
// through Kafka and through the direct path: the loader's tables equal
// PostgreSQL and the direct path's.
func TestKafkaSchemaChanges(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, a int, v text DEFAULT 'abc')`,
		`INSERT INTO items (id, a, v) SELECT g, g, repeat('x', g % 7) FROM generate_series(1, 300) g`)
	if err := replicator.Setup(context.Background(), e.pgURL, "ferry"); err != nil {
		t.Fatal(err)
	}
	kslot, dslot := e.db+"_k", e.db+"_d" // a failed run may leave its slots behind
	e.publish(kslot, 3)
	e.direct(dslot)
	pub, err := kafka.New(kafka.Config{Client: e.client(), Database: e.db, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	stopKafka := e.inBackground(kslot, pub, pub, pub.Capabilities(), kafka.IsRetryable)
	direct := e.chSink("_direct")
	stopDirect := e.inBackground(dslot, direct, direct, direct.Capabilities(), clickhouse.IsRetryable)

	w := e.startWriter("items", 1000)
	pause := func() { time.Sleep(300 * time.Millisecond) }
	pause()
	for _, ddl := range []string{
		`ALTER TABLE items ADD COLUMN c text`,                                                    // in place
		`ALTER TABLE items ADD COLUMN at timestamptz DEFAULT now()`,                              // volatile default: rebuild
		`ALTER TABLE items ADD COLUMN rnd float8 DEFAULT random()`,                               // volatile default: rebuild
		`ALTER TABLE items ALTER COLUMN v DROP DEFAULT, ALTER COLUMN v TYPE int USING length(v)`, // String to Int32: rebuild
		`UPDATE items SET c = 'after ' || id WHERE id % 10 = 0`,                                  //
		`ALTER TABLE items RENAME COLUMN c TO c2`,                                                // ClickHouse 18.16: rebuild
		`ALTER TABLE items ADD COLUMN quiet int`,                                                 // in place
	} {
		e.exec(ddl)
		pause()
	}
	e.exec(`ALTER TABLE items RENAME TO things`)
	w.renamed("things")
	pause()
	e.exec(`ALTER TABLE things ADD COLUMN later text DEFAULT 'L'`) // a rebuild of the renamed table
	pause()
	if n := w.finish(); n < 50 {
		t.Fatalf("the writer wrote %d times: the changes did not happen while rows flowed", n)
	}
	t.Log(time.Now().Format("15:04:05.000"), "changes done; stopping the streams")
	stopKafka()
	stopDirect()
	t.Log(time.Now().Format("15:04:05.000"), "stopped; catching up")
	e.publish(kslot, 3)
	e.direct(dslot)

	viaKafka := e.chSink("_kafka")
	t.Log(time.Now().Format("15:04:05.000"), "loading")
	if err := e.load(viaKafka, "evolve-loader", 200); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Log(time.Now().Format("15:04:05.000"), "loaded")
	e.verifyAll(viaKafka)
	e.verifyAll(direct)
	tms := e.tables(direct)
	if len(tms) != 1 || tms[0].Name != "things" {
		t.Fatalf("tables %v, want things alone", tms)
	}
	if got, want := liveRows(t, viaKafka, tms[0]), liveRows(t, direct, tms[0]); !slices.Equal(got, want) {
		t.Errorf("the Kafka path's rows differ from the direct path's:\n kafka  %d rows %.300q\n direct %d rows %.300q", len(got), got, len(want), want)
	}
	for _, s := range []*clickhouse.Sink{viaKafka, direct} {
		gone, err := s.Exists(context.Background(), &schema.TableMap{Name: "items"})
		if err != nil || gone {
			t.Errorf("%s: the renamed table's old ClickHouse table is still there (%v)", s.Database(), err)
		}
	}
}

// TestKafkaInPlaceChangesAcrossPartitions alters a table in place between
// rows spread over several partitions: whichever partition the loader reads
// first, rows of the older description read later go into the newer table
// without turning it back, and the values set after each change survive.
func TestKafkaInPlaceChangesAcrossPartitions(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, a int)`,
		`INSERT INTO items SELECT g, g FROM generate_series(1, 3000) g`)
	if err := replicator.Setup(context.Background(), e.pgURL, "ferry"); err != nil {
		t.Fatal(err)
	}
	slot := e.db + "_k"
	e.publish(slot, 4)
	e.direct(e.db + "_d")
	e.exec(`UPDATE items SET a = -a WHERE id % 2 = 0`,
		`ALTER TABLE items ADD COLUMN c text`, `UPDATE items SET c = 'c' || id WHERE id % 3 = 0`,
		`ALTER TABLE items ADD COLUMN d bigint`, `UPDATE items SET d = id * 10000000000 WHERE id % 5 = 0`,
		`ALTER TABLE items DROP COLUMN a`, `INSERT INTO items (id, c) SELECT g, 'new' FROM generate_series(3001, 3500) g`,
		`ALTER TABLE items ALTER COLUMN d TYPE numeric(30,0)`, `UPDATE items SET d = d + 1 WHERE id % 7 = 0`)
	e.publish(slot, 4)
	e.direct(e.db + "_d")
	viaKafka := e.chSink("_kafka")
	if err := e.load(viaKafka, "inplace-loader", 100); err != nil {
		t.Fatalf("load: %v", err)
	}
	e.verifyAll(viaKafka)
	direct := e.chSink("_direct")
	for _, tm := range e.tables(direct) {
		if got, want := liveRows(t, viaKafka, tm), liveRows(t, direct, tm); !slices.Equal(got, want) {
			t.Errorf("%s: the Kafka path's %d rows differ from the direct path's %d", tm.Name, len(got), len(want))
		}
	}
}
