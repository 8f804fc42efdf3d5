package replicator_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

// tableRecorder is an Observer that keeps the last table list it was told.
type tableRecorder struct {
	replicator.NopObserver
	mu        sync.Mutex
	last      []string // "schema.table -> destination"
	streaming bool
}

func (r *tableRecorder) Confirmed(pglogrepl.LSN, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streaming = true
}

func (r *tableRecorder) Tables(tables []replicator.ReplicatedTable) {
	var l []string
	for _, t := range tables {
		if t.Table != t.Schema+"."+t.Name {
			l = append(l, "bad parts: "+t.Table)
		}
		l = append(l, t.Table+" -> "+t.Destination)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = l
}

func (r *tableRecorder) is(want ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.streaming && slices.Equal(r.last, want)
}

// TestTableObserver: a TableObserver is told the tables at the start and
// again, while ferry streams, after a table is renamed, dropped, or
// created (it joins through the DDL capture's publication).
func TestTableObserver(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY)`, `CREATE TABLE b (id int PRIMARY KEY)`, `INSERT INTO a VALUES (1)`)
	if err := replicator.Setup(context.Background(), e.adminURL, "ferry"); err != nil {
		t.Fatal(err)
	}
	rec := &tableRecorder{}
	cfg := e.config()
	cfg.Observer = rec
	s := e.sink()
	r, err := replicator.New(cfg, s, s, s.Capabilities(), clickhouse.IsRetryable)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	step := func(what string, want ...string) {
		t.Helper()
		testkit.WaitFor(t, 2*time.Minute, what+": tables "+strings.Join(want, ", "), func() bool { return rec.is(want...) })
	}
	step("streaming", "public.a -> a", "public.b -> b")
	// The tables are told before the copy: wait for a row that only the
	// stream brings, so that the rename below is not made while ferry
	// starts (a rename before the slot exists reaches no stream).
	e.exec(`INSERT INTO b VALUES (100)`)
	testkit.WaitFor(t, 2*time.Minute, "a streamed row of b in ClickHouse", func() bool {
		var n string
		err := e.ch.QueryRow(context.Background(), `SELECT toString(count()) FROM `+e.table("b")+` FINAL WHERE id = 100`).Scan(&n)
		return err == nil && n == "1"
	})
	e.exec(`ALTER TABLE a RENAME TO a2`, `INSERT INTO a2 VALUES (2)`)
	step("after a rename", "public.a2 -> a2", "public.b -> b")
	e.exec(`DROP TABLE b`)
	step("after a drop", "public.a2 -> a2")
	e.exec(`CREATE TABLE c (id int PRIMARY KEY)`, `INSERT INTO c VALUES (1)`)
	step("after a table joined", "public.a2 -> a2", "public.c -> c")
}
