package replicator_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/ferry-cdc/ferry/internal/testkit"
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

func (s *cutResync) InsertStream(ctx context.Context, tm *schema.TableMap) (func(*loader.Columns) error, func(bool) error, error) {
	send, end, err := s.Sink.InsertStream(ctx, tm)
	if err != nil || s.cut || !strings.Contains(tm.Name, "__ferry_rebuild_") {
		return send, end, err
	}
	s.cut = true
	return func(rows *loader.Columns) error {
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

// gatedCopy is the ClickHouse sink, but the first copy into a rebuild's
// shadow table (or into table, when set) waits, before its first rows,
// until release is closed; copying is closed when it starts waiting, and
// ended set once the copy's rows are all sent.
type gatedCopy struct {
	*clickhouse.Sink
	table            string
	copying, release chan struct{}
	gated            bool
	ended            atomic.Bool
}

func (s *gatedCopy) InsertStream(ctx context.Context, tm *schema.TableMap) (func(*loader.Columns) error, func(bool) error, error) {
	send, end, err := s.Sink.InsertStream(ctx, tm)
	if err != nil || s.gated || (s.table == "" && !strings.Contains(tm.Name, "__ferry_rebuild_")) || (s.table != "" && tm.Name != s.table) {
		return send, end, err
	}
	s.gated = true
	first := true
	return func(rows *loader.Columns) error {
			if first {
				first = false
				close(s.copying)
				select {
				case <-s.release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return send(rows)
		}, func(commit bool) error {
			err := end(commit)
			s.ended.Store(true)
			return err
		}, nil
}

// awaitCopying returns once the gated copy waits, failing t when ferry
// stops (a result on done) or ctx ends first.
func (s *gatedCopy) awaitCopying(ctx context.Context, t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case <-s.copying:
	case err := <-done:
		t.Fatalf("ferry stopped before the gated copy began: %v", err)
	case <-ctx.Done():
		t.Fatal("the gated copy did not begin")
	}
}

// TestResyncBesideStream: a resync's copy runs beside the stream. While
// it runs, every table's changes reach ClickHouse, the resynced table's
// too, and the slot is not confirmed past the request; updates that leave
// a TOASTed value unchanged wait for the copy, whose rows they take it
// from. After the swap ClickHouse holds what PostgreSQL holds, and the
// row written behind ferry's back is gone.
func TestResyncBesideStream(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text, body text)`, `ALTER TABLE a ALTER COLUMN body SET STORAGE EXTERNAL`,
		`CREATE TABLE b (id int PRIMARY KEY)`,
		`INSERT INTO a SELECT g, 'v' || g, repeat(md5(g::text), 100) FROM generate_series(1, 5000) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := e.ch.PrepareBatch(ctx, "INSERT INTO "+e.table("a")+" (id, v, body, _ferry_version, _ferry_deleted)")
	if err == nil {
		err = b.Append(int32(1), "wrong", "wrong", uint64(1)<<63, uint8(0))
	}
	if err == nil {
		err = b.Send()
	}
	if err != nil {
		t.Fatal(err)
	}
	s := &gatedCopy{Sink: e.sink(), copying: make(chan struct{}), release: make(chan struct{})}
	r, err := replicator.New(cfg, s, s, s.Capabilities(), clickhouse.IsRetryable)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
	}()
	req, err := replicator.RequestResync(ctx, cfg, []string{"public.a"})
	if err != nil {
		t.Fatal(err)
	}
	s.awaitCopying(ctx, t, done)
	// The copy waits: the stream goes on, for both tables.
	e.exec(`INSERT INTO b SELECT generate_series(1, 100)`,
		`UPDATE a SET v = 'during', body = repeat('d', 3000) WHERE id BETWEEN 2 AND 10`,
		`DELETE FROM a WHERE id BETWEEN 11 AND 20`,
		`INSERT INTO a SELECT g, 'new', repeat('n', 3000) FROM generate_series(5001, 5100) g`)
	for deadline := time.Now().Add(time.Minute); ; {
		b := e.chStrings(`SELECT toString(count()) FROM ` + e.table("b") + ` FINAL WHERE _ferry_deleted = 0`)[0][0]
		a := e.chStrings(`SELECT toString(count()) FROM ` + e.table("a") + ` FINAL WHERE _ferry_deleted = 0 AND v IN ('during', 'new')`)[0][0]
		if b == "100" && a == "109" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("while the resync's copy waits, ClickHouse got %s of b's 100 rows and %s of a's 109 changed rows", b, a)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s.ended.Load() {
		t.Fatal("the copy ended before it was let go")
	}
	time.Sleep(time.Second) // a status update's time
	confirmed, err := pglogrepl.ParseLSN(e.pgStrings(`SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '` + cfg.Slot + `'`)[0][0])
	if err != nil {
		t.Fatal(err)
	}
	if confirmed >= req.LSN {
		t.Fatalf("slot confirmed at %s while the resync requested at %s copies", confirmed, req.LSN)
	}
	// Updates that leave the TOASTed body alone, of rows the shadow does
	// not hold yet (one moves its key): they wait for the copy.
	e.exec(`UPDATE a SET v = 'body kept' WHERE id BETWEEN 30 AND 40`, `UPDATE a SET id = id + 10000 WHERE id BETWEEN 21 AND 25`)
	time.Sleep(time.Second)
	close(s.release)
	if err := replicator.WaitResync(ctx, cfg, req, nil); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	e.mustCatchUp(cfg)
	if got := e.chStrings(`SELECT v FROM ` + e.table("a") + ` FINAL WHERE id = 1`)[0][0]; got != "v1" {
		t.Errorf("row 1 after the resync: %q, want v1", got)
	}
	n := e.verifyAll(cfg)
	if n["public.a"] != 5090 || n["public.b"] != 100 {
		t.Errorf("verify counted %v, want 5090 rows of a and 100 of b", n)
	}
	sameRows(t, "a's changed bodies",
		e.chStrings(`SELECT toString(id), v, lower(hex(MD5(body))) FROM `+e.table("a")+` FINAL WHERE _ferry_deleted = 0 AND (id BETWEEN 30 AND 40 OR id > 10000) ORDER BY id`),
		e.pgStrings(`SELECT id::text, v, md5(body) FROM a WHERE id BETWEEN 30 AND 40 OR id > 10000 ORDER BY a.id`))
	if n := e.chStrings(`SELECT toString(count()) FROM system.tables WHERE database = '` + e.db + `' AND name LIKE '%__ferry_%'`)[0][0]; n != "0" {
		t.Errorf("%s shadow or old tables left in ClickHouse", n)
	}
}

// TestResyncBesideStreamTruncate: a TRUNCATE of a table whose copy runs
// beside the stream (it commits once the copy's lock is gone) waits in the
// stream for the swap, and then empties the new table: the copied rows,
// older than the TRUNCATE, do not come back.
func TestResyncBesideStreamTruncate(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text)`, `INSERT INTO a SELECT g, 'v' || g FROM generate_series(1, 3000) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := &gatedCopy{Sink: e.sink(), copying: make(chan struct{}), release: make(chan struct{})}
	run := e.runInBackground(ctx, cfg, s)
	req, err := replicator.RequestResync(ctx, cfg, []string{"public.a"})
	if err != nil {
		t.Fatal(err)
	}
	s.awaitCopying(ctx, t, run.done)
	// The TRUNCATE waits for the copy's lock: let the copy go meanwhile.
	go func() {
		time.Sleep(time.Second)
		close(s.release)
	}()
	e.exec(`TRUNCATE a`, `INSERT INTO a SELECT g, 'after' FROM generate_series(5001, 5010) g`)
	if err := replicator.WaitResync(ctx, cfg, req, nil); err != nil {
		t.Fatal(err)
	}
	run.end()
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.a"]; n != 10 {
		t.Errorf("verify counted %d rows of a, want the 10 inserted after the TRUNCATE", n)
	}
}

// heldWrite is the ClickHouse sink, but its first write of table waits
// until release is closed (held is closed when it starts waiting): the
// stream, which writes on its own goroutine, receives nothing meanwhile.
type heldWrite struct {
	*clickhouse.Sink
	table         string
	held, release chan struct{}
	once          bool
}

func (s *heldWrite) Write(ctx context.Context, b *loader.Batch) error {
	if b.Table.Name == s.table && !s.once {
		s.once = true
		close(s.held)
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Sink.Write(ctx, b)
}

// TestResyncBeforeAlter: a resync request that the stream meets after the
// catalog has a column added later in the WAL. pgoutput sent the table's
// shape before, so the rows between the request and the ALTER TABLE come
// without a new Relation message: the table is rebuilt in the stream's
// shape (a copy of the catalog's would meet them with a column too many),
// and the ALTER TABLE, when the stream meets it, rebuilds it again.
func TestResyncBeforeAlter(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text)`, `CREATE TABLE b (id int PRIMARY KEY)`,
		`INSERT INTO a SELECT g, 'v' || g FROM generate_series(1, 2000) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := &heldWrite{Sink: e.sink(), table: "b", held: make(chan struct{}), release: make(chan struct{})}
	run := e.runInBackground(ctx, cfg, s)
	// The walsender sends a's shape with this change, and not again before
	// the ALTER TABLE.
	e.exec(`UPDATE a SET v = 'seen' WHERE id = 2000`)
	testkit.WaitFor(t, time.Minute, "the update of row 2000", func() bool {
		run.alive()
		return e.chStrings(`SELECT v FROM ` + e.table("a") + ` FINAL WHERE id = 2000`)[0][0] == "seen"
	})
	e.exec(`INSERT INTO b VALUES (1)`)
	select {
	case <-s.held:
	case err := <-run.done:
		t.Fatalf("ferry stopped before writing table b: %v", err)
	case <-ctx.Done():
		t.Fatal("ferry did not write table b")
	}
	req, err := replicator.RequestResync(ctx, cfg, []string{"public.a"})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(`UPDATE a SET v = 'between' WHERE id <= 10`, `INSERT INTO a VALUES (2001, 'between')`,
		`ALTER TABLE a ADD COLUMN w int DEFAULT 7`, `ALTER TABLE a ALTER COLUMN v TYPE varchar(40)`,
		`INSERT INTO a VALUES (2002, 'after', 8)`, `UPDATE a SET w = 9 WHERE id = 5`)
	close(s.release)
	waited := make(chan error, 1)
	go func() { waited <- replicator.WaitResync(ctx, cfg, req, nil) }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-run.done:
		t.Fatalf("ferry stopped before the resync was done: %v", err)
	}
	run.end()
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.a"]; n != 2002 {
		t.Errorf("verify counted %d rows, want 2002", n)
	}
	got := e.chStrings(`SELECT toString(id), v, toString(w) FROM ` + e.table("a") + ` FINAL WHERE id IN (1, 5, 2001, 2002) ORDER BY id`)
	want := [][]string{{"1", "between", "7"}, {"5", "between", "9"}, {"2001", "between", "7"}, {"2002", "after", "8"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows after the resync and the ALTER TABLE: %v, want %v", got, want)
	}
}
