package replicator_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
)

var errCopyCut = errors.New("test: the copy is cut short")

// cutCopy is the ClickHouse sink, but a copy through it stores the rows of
// its first send and then fails, as a ferry killed in the middle of a copy
// would leave the table: part of its rows. The first send's INSERT is
// ended (stored) at the second send, whichever worker makes it: one worker
// may copy both page ranges through one INSERT on a loaded machine.
type cutCopy struct {
	*clickhouse.Sink
	mu    sync.Mutex
	sends int
	first func(commit bool) error // ends the first send's INSERT
}

func (s *cutCopy) InsertStream(ctx context.Context, tm *schema.TableMap) (func(*loader.Columns) error, func(bool) error, error) {
	send, end, err := s.Sink.InsertStream(ctx, tm)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex // one call at a time into the INSERT
	var once sync.Once
	var endErr error
	endOnce := func(commit bool) error {
		mu.Lock()
		defer mu.Unlock()
		once.Do(func() { endErr = end(commit) })
		return endErr
	}
	return func(rows *loader.Columns) error {
		s.mu.Lock()
		s.sends++
		n := s.sends
		if n == 1 {
			s.first = endOnce
		}
		first := s.first
		s.mu.Unlock()
		if n > 1 {
			if err := first(true); err != nil {
				return err
			}
			return errCopyCut
		}
		mu.Lock()
		defer mu.Unlock()
		return send(rows)
	}, endOnce, nil
}

// TestInterruptedCopyMissing: a restart copies a table whose ClickHouse
// table is gone (dropped to resync it); that copy is cut short, leaving
// part of the rows. The next start must copy the table again, not take the
// partial table for a finished one.
func TestInterruptedCopyMissing(t *testing.T) {
	e := newEnv(t)
	// Over 2,048 heap pages: two workers copy it as two page ranges.
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`,
		`INSERT INTO items SELECT g, repeat('v', 100) || g FROM generate_series(1, 200000) g`, `ANALYZE items`)
	cfg := e.config()
	cfg.CopyWorkers = 2
	e.mustCatchUp(cfg)
	if err := e.ch.Exec(context.Background(), "DROP TABLE "+e.table("items")); err != nil {
		t.Fatal(err)
	}
	err := e.catchUpThrough(cfg, &cutCopy{Sink: e.sink()})
	if !errors.Is(err, errCopyCut) {
		t.Fatalf("run: %v, want the copy cut short", err)
	}
	if n := e.chFinal("items"); n == 0 || n >= 200000 {
		t.Fatalf("after the cut copy ClickHouse holds %d rows: the test wants a partial table", n)
	}
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.items"]; n != 200000 {
		t.Errorf("items: %d rows, want 200000", n)
	}
}

var (
	_ replicator.StreamInserter = (*clickhouse.Sink)(nil)
	_ replicator.StreamInserter = (*cutCopy)(nil)
	_ replicator.StreamInserter = (*cutResync)(nil)
	_ replicator.StreamInserter = (*gatedCopy)(nil)
)
