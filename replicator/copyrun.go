package replicator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// concurrentWriter is a sink whose Write may be called from several
// goroutines at once; the copy then keeps one INSERT in flight per worker.
// Other sinks get one Write at a time.
type concurrentWriter interface {
	ConcurrentWrites() bool
}

// streamInserter is a sink that takes a table's rows as one INSERT in
// several sends, as clickhouse.Sink.InsertStream documents.
type streamInserter interface {
	InsertStream(ctx context.Context, tm *schema.TableMap) (send func(cols *loader.Columns) error, end func(commit bool) error, err error)
}

// copyJob is the copy of one table into target, rows getting Version
// version: 0 for the initial copy, below every change the stream brings
// afterwards for one taken while it runs (see copycut.go).
type copyJob struct {
	rel     *relation
	target  *schema.TableMap
	version uint64
	src     source
	// recheck, set when the copy's snapshot was taken before the table's
	// lock (the initial copy), is a connection outside the snapshot that
	// tells whether the table changed in between (copyrecheck.go); such a
	// job is deferred: plan leaves it uncopied and sets deferred.
	recheck  *pgx.Conn
	deferred bool
	// planned, when not nil, is called once the target is emptied, before
	// any row is written to it.
	planned func()

	// binary: the table is read in COPY's binary format (set by copyJobs).
	binary bool

	total uint64        // the planner's estimate of the rows, for progress
	start time.Time     // when the copy of the table began
	seq   atomic.Uint64 // rows handed a Seq so far
	left  int           // ranges not yet stored; guarded by copier.mu
	rows  uint64        // rows stored; guarded by copier.mu
}

// minCopyBatch is the fewest rows a worker's share of the batch limit
// holds, so that many workers do not make ClickHouse merge many tiny parts.
const minCopyBatch = 10000

type copyTask struct {
	job *copyJob
	rng pageRange
}

// copier is one copyJobs call's shared state.
type copier struct {
	r          *Replicator
	concurrent bool           // the sink takes concurrent Writes
	streams    streamInserter // the sink, when it takes concurrent INSERT streams; else nil
	maxRows    int            // a worker's share of Config.Batch.MaxRows
	maxBytes   int            // a worker's share of Config.Batch.MaxBytes
	writeMu    sync.Mutex     // one Write at a time when it does not
	mu         sync.Mutex     // guards left, the jobs' left and rows, and the Observer
	left       []copyTask     // tasks other workers could not lock the table of
}

// copyJobs copies the tables of jobs with COPY ... TO STDOUT: in text
// format, the same text forms pgoutput sends, through the same converters,
// or in binary format where every column has a binary reader that gives
// the same values (schema.ColumnMap.Binary; Config.CopyText). It empties each target first. conn is in the transaction whose snapshot
// the copy reads; with Config.CopyWorkers above one, further connections
// import snapshot (exported by that transaction or the slot) and read a big
// table's page ranges side by side: under one snapshot each visible row
// version has one ctid, so the ranges together read each row exactly once,
// however rows move meanwhile. snapshot "" means conn alone copies.
func (r *Replicator) copyJobs(ctx context.Context, conn *pgx.Conn, snapshot string, jobs []*copyJob) error {
	workers := r.cfg.CopyWorkers
	if snapshot == "" {
		workers = 1
	}
	for _, j := range jobs {
		j.binary = !r.cfg.CopyText && j.readsBinary()
	}
	c := &copier{r: r}
	if cw, ok := r.sink.(concurrentWriter); ok {
		c.concurrent = cw.ConcurrentWrites()
	}
	if si, ok := r.sink.(streamInserter); ok && c.concurrent {
		c.streams = si
	}
	var tasks []copyTask
	for _, j := range jobs {
		ranges, err := c.plan(ctx, conn, j, workers)
		if err != nil {
			return err
		}
		for _, rng := range ranges {
			tasks = append(tasks, copyTask{job: j, rng: rng})
		}
	}
	for _, j := range jobs {
		if j.planned != nil {
			j.planned()
		}
	}
	n := max(1, min(workers, len(tasks)))
	// The workers share the batch limits, so that the rows held in memory
	// are bounded as when one connection copies.
	c.maxRows = max(r.cfg.Batch.MaxRows/n, min(r.cfg.Batch.MaxRows, minCopyBatch))
	c.maxBytes = max(r.cfg.Batch.MaxBytes/n, 1)
	queue := make(chan copyTask, len(tasks))
	for _, t := range tasks {
		queue <- t
	}
	close(queue)
	g, gctx := errgroup.WithContext(ctx)
	var others sync.WaitGroup
	others.Add(n - 1)
	g.Go(func() error {
		if err := c.work(gctx, conn, queue, true); err != nil {
			return err
		}
		// Ranges the others could not lock (a schema change waits for the
		// copy): this connection holds every table's lock.
		others.Wait()
		left := c.leftovers()
		if len(left) == 0 {
			return nil
		}
		r.log.Info("a schema change waits for the copy to end: the other connections left ranges to the first", zap.Int("ranges", len(left)))
		return c.work(gctx, conn, left, true)
	})
	for i := 1; i < n; i++ {
		g.Go(func() error {
			defer others.Done()
			wconn, tx, err := beginSnapshot(gctx, r.cfg.ConnString, snapshot)
			if err != nil {
				if gctx.Err() != nil {
					return gctx.Err()
				}
				// The first connection and the others copy what this one
				// would have (max_connections may be near, say).
				r.log.Warn("a copy connection could not start; copying with fewer", zap.Error(err))
				return nil
			}
			defer wconn.Close(context.Background())
			defer tx.Rollback(context.Background()) //nolint:errcheck // read-only; the connection closes anyway
			return c.work(gctx, wconn, queue, false)
		})
	}
	return g.Wait()
}

// leave puts aside a task a worker could not lock the table of.
func (c *copier) leave(t copyTask) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left = append(c.left, t)
}

// leftovers is a queue of the tasks put aside.
func (c *copier) leftovers() <-chan copyTask {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := make(chan copyTask, len(c.left))
	for _, t := range c.left {
		q <- t
	}
	close(q)
	c.left = nil
	return q
}

// plan empties the job's target and splits the table into ranges.
func (c *copier) plan(ctx context.Context, conn *pgx.Conn, j *copyJob, workers int) ([]pageRange, error) {
	r := c.r
	names := conn
	if j.recheck != nil {
		names = j.recheck // the snapshot's catalog may hold an older name
	}
	now, err := lockTable(ctx, conn, names, j.rel.ref)
	if err != nil {
		return nil, err
	}
	if j.recheck != nil {
		why, err := changedSinceSnapshot(ctx, conn, j.recheck, j.rel)
		if errors.Is(err, errRenamedAtStart) {
			// The initial copy empties its targets anyway: this one, of
			// the old name, would be left behind.
			if d, ok := r.sink.(interface {
				DropTable(ctx context.Context, name string) error
			}); ok {
				if derr := d.DropTable(ctx, j.target.Name); derr != nil {
					return nil, derr
				}
			}
		}
		if err != nil {
			return nil, err
		}
		if why != "" {
			r.log.Warn("the table changed while the initial copy began: it is copied after the others, under a snapshot of its own",
				zap.Stringer("table", j.rel.ref), zap.String("why", why))
			j.deferred = true
			return nil, nil
		}
	}
	j.src.table.Schema, j.src.table.Name = now.Schema, now.Name
	empty := r.sink.Truncate
	if cs, ok := r.sink.(loader.CopyStarter); ok {
		empty = cs.StartCopy
	}
	if err := empty(ctx, j.target); err != nil {
		return nil, fmt.Errorf("copy of %s: empty the ClickHouse table: %w", j.rel.ref, err)
	}
	ranges, err := copyRanges(ctx, conn, j.rel.ref.OID, workers)
	if err != nil {
		return nil, fmt.Errorf("copy of %s: %w", j.rel.ref, err)
	}
	var estimate float64
	if err := conn.QueryRow(ctx, `SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = $1`, j.rel.ref.OID).Scan(&estimate); err == nil {
		j.total = uint64(estimate)
	}
	j.left = len(ranges)
	j.start = time.Now()
	if len(ranges) > 1 {
		r.log.Info("copying table in page ranges", zap.Stringer("table", j.rel.ref), zap.Int("ranges", len(ranges)))
	}
	r.cfg.Observer.SnapshotProgress(j.rel.ref.String(), 0, j.total, false)
	return ranges, nil
}

// write stores one batch.
func (c *copier) write(ctx context.Context, b *loader.Batch) error {
	if !c.concurrent {
		c.writeMu.Lock()
		defer c.writeMu.Unlock()
	}
	return c.r.sink.Write(ctx, b)
}

// progress accounts for rows of j handed to the sink.
func (c *copier) progress(j *copyJob, rows uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j.rows += rows
	if j.left > 0 {
		c.r.cfg.Observer.SnapshotProgress(j.rel.ref.String(), j.rows, j.total, false)
	}
}

// finished accounts for ranges of j whose rows all are stored; the last
// range finishes the table.
func (c *copier) finished(j *copyJob, ranges int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j.left -= ranges
	if j.left > 0 {
		return
	}
	c.r.cfg.Observer.SnapshotProgress(j.rel.ref.String(), j.rows, j.total, true)
	took := time.Since(j.start)
	c.r.log.Info("copied table", zap.Stringer("table", j.rel.ref), zap.Uint64("rows", j.rows), zap.Duration("took", took),
		zap.Float64("rows_per_s", float64(j.rows)/took.Seconds()), zap.String("format", formatName(j.binary)))
}

// work copies tasks from queue on conn until none is left. The
// coordinating connection (owner) holds every table's lock; another
// leaves the tasks of a table it cannot lock at once (see copylock.go).
func (c *copier) work(ctx context.Context, conn *pgx.Conn, queue <-chan copyTask, owner bool) error {
	w := &copyWorker{c: c, conn: conn}
	defer w.abandon()
	locked := map[*copyJob]bool{}
	for t := range queue {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !owner && !locked[t.job] {
			ok, err := tryLock(ctx, conn, t.job.src.table)
			if err != nil {
				return err
			}
			if !ok {
				c.leave(t)
				continue
			}
			locked[t.job] = true
		}
		if w.job != t.job {
			if err := w.finish(ctx); err != nil {
				return err
			}
			w.job = t.job
		}
		if err := w.copyRange(ctx, t); err != nil {
			return err
		}
	}
	return w.finish(ctx)
}

// copyWorker is one connection's copy. Rows of consecutive ranges of a
// table share batches, and with a streamInserter one INSERT, so splitting
// a table adds no small INSERTs.
type copyWorker struct {
	c     *copier
	conn  *pgx.Conn
	job   *copyJob        // the table being read
	cols  *loader.Columns // the pending rows of colsOf, column by column
	bytes int             // the pending rows' estimated size
	// colsOf is the job cols was made for.
	colsOf *copyJob
	// ranges of job read to the end
	ranges int
	// For a sink without streams: the pending rows as a batch, their
	// values from a reused slab.
	batch  loader.Batch
	values valueSlab
	// The open INSERT of job's rows, with a streamInserter.
	send func(cols *loader.Columns) error
	end  func(commit bool) error
}

// copyRange reads one range of a table into the worker's batches.
func (w *copyWorker) copyRange(ctx context.Context, t copyTask) error {
	j := t.job
	maxRows, maxBytes := w.c.maxRows, w.c.maxBytes
	if w.colsOf != j {
		w.cols, w.colsOf = j.columns(), j
	}
	cols := w.cols
	var bins []schema.BinaryBuilder
	if j.binary {
		bins = binaryBuilders(cols)
	}
	row := func(fields [][]byte) error {
		size, err := j.rel.copyColumns(cols, bins, fields, j.src.from)
		if err != nil {
			return err
		}
		w.bytes += size
		if cols.Len() >= maxRows || w.bytes >= maxBytes {
			return w.flush(ctx)
		}
		return nil
	}
	var reader interface {
		io.Writer
		Close() error
	} = &copyReader{row: row}
	if bins != nil {
		reader = &copyBinaryReader{row: row}
	}
	sql := copySQL(j.src.table, j.src.read, t.rng, j.src.where, bins != nil)
	if _, err := w.conn.PgConn().CopyTo(ctx, reader, sql); err != nil {
		return fmt.Errorf("initial copy of %s: %w", j.rel.ref, err)
	}
	if err := reader.Close(); err != nil {
		return fmt.Errorf("initial copy of %s: %w", j.rel.ref, err)
	}
	w.ranges++
	return nil
}

func formatName(binary bool) string {
	if binary {
		return "binary"
	}
	return "text"
}

// readsBinary reports whether every column the job reads takes
// PostgreSQL's binary form (a placeholder column reads nothing).
func (j *copyJob) readsBinary() bool {
	if len(j.src.read) == 0 {
		return false
	}
	for i, c := range j.rel.tm.Columns {
		if j.src.from[i] >= 0 && !c.Binary() {
			return false
		}
	}
	return true
}

// binaryBuilders returns cols' builders as BinaryBuilders, which the
// builders of columns that are Binary are.
func binaryBuilders(cols *loader.Columns) []schema.BinaryBuilder {
	bins := make([]schema.BinaryBuilder, len(cols.Cols))
	for i, b := range cols.Cols {
		bins[i], _ = b.(schema.BinaryBuilder)
	}
	return bins
}

// columns makes empty Columns for the job's rows: converted by the
// relation's mapping.
func (j *copyJob) columns() *loader.Columns {
	c := &loader.Columns{Version: j.version, Cols: make([]schema.ColumnBuilder, len(j.rel.tm.Columns))}
	for i, cm := range j.rel.tm.Columns {
		c.Cols[i] = cm.NewBuilder()
	}
	return c
}

// flush hands the pending rows, if any, to the sink.
func (w *copyWorker) flush(ctx context.Context) error {
	j := w.job
	if j == nil || w.cols == nil || w.cols.Len() == 0 {
		return nil
	}
	n := uint64(w.cols.Len())
	// Seq tells apart the rows of an append-only table, which share
	// Version: each batch takes the next numbers of its table.
	w.cols.FirstSeq = j.seq.Add(n) - n + 1
	if err := w.hand(ctx, j, w.cols); err != nil {
		return fmt.Errorf("initial copy of %s: %w", j.rel.ref, err)
	}
	w.c.progress(j, n)
	// The sink keeps nothing of the rows once it returns: their memory is
	// reused.
	w.cols.Reset()
	w.bytes = 0
	return nil
}

// hand sends the rows into the open INSERT stream, opening it first, or
// writes them as a batch of their own.
func (w *copyWorker) hand(ctx context.Context, j *copyJob, cols *loader.Columns) error {
	if w.c.streams == nil {
		w.batch.Table = j.target
		w.batch.Rows = w.batch.Rows[:0]
		for i := range cols.Len() {
			w.batch.Rows = append(w.batch.Rows, cols.RowInto(i, w.values.next(len(cols.Cols))))
		}
		defer w.values.reset()
		return w.c.write(ctx, &w.batch)
	}
	if w.send == nil {
		send, end, err := w.c.streams.InsertStream(ctx, j.target)
		if err != nil {
			return err
		}
		w.send, w.end = send, end
	}
	return w.send(cols)
}

// finish stores the rest of the job's rows and accounts for its ranges.
func (w *copyWorker) finish(ctx context.Context) error {
	if w.job == nil {
		return nil
	}
	if err := w.flush(ctx); err != nil {
		return err
	}
	if w.end != nil {
		end := w.end
		w.send, w.end = nil, nil
		if err := end(true); err != nil {
			return fmt.Errorf("initial copy of %s: %w", w.job.rel.ref, err)
		}
	}
	w.c.finished(w.job, w.ranges)
	w.ranges = 0
	return nil
}

// abandon ends an INSERT stream left open by an error.
func (w *copyWorker) abandon() {
	if w.end != nil {
		_ = w.end(false)
		w.send, w.end = nil, nil
	}
}

// valueSlab hands out the value slices of a batch's rows from a few large
// allocations instead of one per row, and reuses them for the next batch.
type valueSlab struct {
	chunks [][]any
	chunk  int // index of the chunk being filled
	used   int // values of it handed out
}

// slabChunk is how many values one allocation holds.
const slabChunk = 1 << 14

func (s *valueSlab) next(n int) []any {
	for {
		if s.chunk < len(s.chunks) {
			c := s.chunks[s.chunk]
			if s.used+n <= len(c) {
				v := c[s.used : s.used+n : s.used+n]
				s.used += n
				return v
			}
			s.chunk++
			s.used = 0
			continue
		}
		s.chunks = append(s.chunks, make([]any, max(slabChunk, n)))
	}
}

func (s *valueSlab) reset() { s.chunk, s.used = 0, 0 }
