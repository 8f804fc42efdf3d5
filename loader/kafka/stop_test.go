package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/loader/kafka"
)

// TestLoaderStopCutsWriteShort stops a loader while it writes a batch, the
// insert failing with the closed connection's error (as the ClickHouse
// client's does when the stop lands on it) instead of the context's. The
// stop must be clean: the loader writes what it read again, commits it,
// and returns nil; the next loader loads the rest.
func TestLoaderStopCutsWriteShort(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`,
		`INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 3000) g`)
	slot := e.db + "_k"
	e.publish(slot, 3)
	e.exec(`UPDATE items SET v = 'updated' WHERE id % 3 = 0`, `DELETE FROM items WHERE id % 10 = 0`)
	e.publish(slot, 3)

	sink := e.chSink("_stop")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := testkit.NewStopMidWrite(sink, cancel)
	w.Arm()
	l, err := kafka.NewLoader(kafka.LoadConfig{Client: e.client(), Group: "stop-loader", MaxRows: 500}, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Run(ctx); err != nil {
		t.Fatalf("a stop in the middle of a write: %v (want a clean stop)", err)
	}
	select {
	case <-w.Fired:
	default:
		t.Fatal("the loader stopped without writing")
	}
	if err := e.load(sink, "stop-loader", 500); err != nil {
		t.Fatalf("load after the stop: %v", err)
	}
	e.verifyAll(sink)
}
