package replicator_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
)

var errCutResync = errors.New("test: ferry dies in the middle of a resync's copy")

// cutResync is the ClickHouse sink, but the first copy into a rebuild's
// shadow table fails after its first rows went in: ferry stops in the
// middle of a resync.
type cutResync struct {
	*clickhouse.Sink
	cut bool
}

func (s *cutResync) InsertStream(ctx context.Context, tm *schema.TableMap) (func([]loader.Row) error, func(bool) error, error) {
	send, end, err := s.Sink.InsertStream(ctx, tm)
	if err != nil || s.cut || !strings.Contains(tm.Name, "__ferry_rebuild_") {
		return send, end, err
	}
	s.cut = true
	return func(rows []loader.Row) error {
		if err := send(rows); err != nil {
			return err
		}
		_ = end(true)
		return errCutResync
	}, func(bool) error { return nil }, nil
}

// TestResyncCutShort: a resync request met by a ferry that dies during the
// copy is met again by the next start, which copies the table afresh: the
// request stays in the slot until the shadow table is swapped in. Rows
// ClickHouse held behind ferry's back are gone after it, and a request
// made while no ferry runs is carried out at the next start.
func TestResyncCutShort(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text)`, `CREATE TABLE b (id int PRIMARY KEY)`, `INSERT INTO a SELECT g, 'v' || g FROM generate_series(1, 5000) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	ctx := context.Background()
	put := func(id int32, v string) {
		t.Helper()
		b, err := e.ch.PrepareBatch(ctx, "INSERT INTO "+e.table("a")+" (id, v, _ferry_version, _ferry_deleted)")
		if err == nil {
			err = b.Append(id, v, uint64(1)<<63, uint8(0))
		}
		if err == nil {
			err = b.Send()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	put(1, "wrong")
	r, err := replicator.RequestResync(ctx, cfg, []string{"public.a"})
	if err != nil {
		t.Fatal(err)
	}
	// (r.Active may still be true: the server notices the last run's end a
	// moment after it.)
	if len(r.Tables) != 1 || r.Tables[0] != "public.a" || r.LSN == 0 {
		t.Fatalf("request: %+v, want public.a at a WAL position", r)
	}
	e.exec(`UPDATE a SET v = 'after the request' WHERE id <= 10`)
	s := &cutResync{Sink: e.sink()}
	if err := e.catchUpThrough(cfg, s); !errors.Is(err, errCutResync) {
		t.Fatalf("run: %v, want it cut short in the resync's copy (cut %v)", err, s.cut)
	}
	e.mustCatchUp(cfg)
	if got := e.chStrings(`SELECT v FROM ` + e.table("a") + ` FINAL WHERE id = 1`)[0][0]; got != "after the request" {
		t.Errorf("row 1 after the resync: %q, want \"after the request\"", got)
	}
	if n := e.verifyAll(cfg)["public.a"]; n != 5000 {
		t.Errorf("verify counted %d rows, want 5000", n)
	}
	if n := e.chStrings(`SELECT toString(count()) FROM system.tables WHERE database = '` + e.db + `' AND name LIKE '%__ferry_%'`)[0][0]; n != "0" {
		t.Errorf("%s shadow or old tables left in ClickHouse", n)
	}
	// Asked for a table that is no longer replicated: a warning, no stop.
	if _, err := replicator.RequestResync(ctx, cfg, []string{"public.a"}); err != nil {
		t.Fatal(err)
	}
	e.exec(`DROP TABLE a`, `INSERT INTO b VALUES (1)`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.b"]; n != 1 {
		t.Errorf("table b: %d rows, want 1", n)
	}
}
