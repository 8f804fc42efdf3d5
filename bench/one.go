package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// entry runs one strategy × workload × client count n times and sums it up.
// Every run of an entry uses the same key streams (combo numbers the
// workload × client count, so that entries differ) on a table created anew.
func (b *bencher) entry(ctx context.Context, s Strategy, workload string, clients, combo int) (Entry, error) {
	var runs []RunResult
	for i := 1; i <= b.cfg.Runs; i++ {
		b.cfg.Progress(b.done, b.total, fmt.Sprintf("%s %s c=%d run %d/%d", s.Name, workload, clients, i, b.cfg.Runs))
		r, err := b.runOne(ctx, s, b.spec(s, workload, clients, combo), i)
		if err != nil {
			return Entry{}, err
		}
		runs = append(runs, r)
		b.done++
		b.cfg.Progress(b.done, b.total, fmt.Sprintf("%s %s c=%d run %d: %.0f tps", s.Name, workload, clients, i, r.TPS))
	}
	e := summarize(s, workload, clients, b.res.Settings.Fillfactor[s.Name], runs)
	b.memoryRatio(&e)
	return e, nil
}

// memoryRatio records how much of shared_buffers heap and index take, and
// warns when they crowd it: seed 003's hot-block method assumes the index
// stays in memory.
func (b *bencher) memoryRatio(e *Entry) {
	sb := b.res.Settings.SharedBuffersBytes
	if sb <= 0 || e.N == 0 {
		return
	}
	e.MemoryRatio = float64(e.HeapBytes+e.IndexBytes) / float64(sb)
	if e.MemoryRatio >= 0.75 {
		b.res.Warnings = append(b.res.Warnings, fmt.Sprintf("%s %s c=%d: heap plus PK index are %.0f%% of shared_buffers (%s): "+
			"pages leave the cache during the run, so hot blocks and pages written say less", e.Strategy, e.Workload, e.Clients,
			100*e.MemoryRatio, b.res.Settings.SharedBuffers))
	}
}

// spec is one run's load: the same key streams for every run of an entry,
// and a clock of its own.
func (b *bencher) spec(s Strategy, workload string, clients, combo int) loadSpec {
	return loadSpec{strategy: s, workload: workload, clients: clients, duration: b.cfg.Duration,
		batch: b.cfg.BatchRows, payload: b.payload(), seed: b.cfg.KeySeed,
		stream0: 1 + combo*maxClients, clock: b.loadClock()}
}

// loadClock is the key generators' clock for one run: Config.Clock when
// set, else a synthetic clock that every client of the run shares.
func (b *bencher) loadClock() Clock {
	if b.cfg.Clock != nil {
		return b.cfg.Clock
	}
	return newTickClock(ClockStart, b.cfg.KeysPerMillisecond)
}

// window is one run's measuring window: WAL insert positions at its start
// and end, and what the guards read at its start.
type window struct {
	start, end    int64
	fpi0, fpi1    *int64
	pages0        int64
	ckpt0, ckptAt int64
	autovac0      int64
	slot          *walSlot
}

// runOne is one timed run on a fresh table, and its measurements. The
// window opens right before the load and closes after the run's own
// checks; admin work (CDC setup before, CHECKPOINT, VACUUM, sizes after)
// stays outside it.
func (b *bencher) runOne(ctx context.Context, s Strategy, l loadSpec, run int) (RunResult, error) {
	r := RunResult{Run: run}
	t, err := b.create(ctx, s)
	if err != nil {
		return r, err
	}
	l.keys = t.keys
	if b.cfg.WithCDC {
		if t.cdc, err = b.startCDC(ctx, s); err != nil {
			return r, err
		}
		defer func() {
			t.cdc.stop()
			if err := b.dropCDC(context.WithoutCancel(ctx)); err != nil {
				b.log.Warn("could not drop the slot", zap.Error(err))
			}
		}()
	}
	if holders, err := b.settleCatalogs(ctx); err != nil {
		return r, err
	} else if len(holders) > 0 {
		b.log.Warn("catalog rows the benchmark's DDL made dead are still visible, so no VACUUM could remove them: autovacuum may start on a catalog inside the window, which then does not count; "+
			"an inactive slot holds them until a consumer reads it (drop one that nothing uses: SELECT pg_drop_replication_slot('name'))",
			zap.Strings("held_by", holders), zap.Duration("waited at most", horizonWait))
	}
	if !b.cfg.NoCheckpoint {
		if err := b.checkpoint(ctx); err != nil {
			return r, err
		}
	}
	if t.cdc != nil {
		if _, err := t.cdc.waitCaughtUp(ctx, 5*time.Minute); err != nil {
			return r, err
		}
	}
	pool, err := b.loadPool(ctx, l.clients)
	if err != nil {
		return r, err
	}
	defer pool.Close()
	// Seeding took the progress line over; say that the timed load runs.
	b.cfg.Progress(b.done, b.total, fmt.Sprintf("%s %s c=%d run %d/%d: %s load", s.Name, l.workload, l.clients, run, b.cfg.Runs, l.duration))
	r.Checks = append(r.Checks, b.checkSessionSettings(ctx, pool, l.clients, run))
	w, err := b.openWindow(ctx, t)
	if err != nil {
		return r, err
	}
	defer w.slot.drop(context.WithoutCancel(ctx)) //nolint:errcheck // dropped below; this is for the error paths
	av := startAutovacWatch(ctx, b.db)
	smp := startSampler(ctx, b.db, t.rel.indexes, b.loadApp, 500*time.Millisecond)
	var lags *lagSampler
	if t.cdc != nil {
		lags = startLagSampler(ctx, b.db, b.cfg.Slot, time.Now())
	}
	load, loadErr := runLoad(ctx, pool, l)
	smpErr := smp.finish()
	if loadErr != nil {
		return r, loadErr
	}
	if smpErr != nil {
		return r, smpErr
	}
	loadEnd, _, err := walPosition(ctx, b.db, false)
	if err != nil {
		return r, err
	}
	if t.cdc != nil {
		if err := t.cdc.mark(ctx); err != nil {
			return r, err
		}
	}
	if err := b.runChecks(ctx, t, &r, l, load, run); err != nil {
		return r, err
	}
	if err := b.closeWindow(ctx, w); err != nil {
		return r, err
	}
	autovac, err := av.finish()
	if err != nil {
		return r, err
	}
	pool.Close()
	if err := b.waitLoadGone(ctx); err != nil {
		return r, err
	}
	if t.cdc != nil {
		caught, err := t.cdc.waitConfirmed(ctx, loadEnd, 5*time.Minute)
		r.Checks = append(r.Checks, Check{Run: run, Name: "cdc caught up", Passed: err == nil, Detail: errDetail(err, "slot confirmed the end of the load")})
		if r.Lag, err = lags.finish(load.ended, caught); err != nil {
			return r, err
		}
	}
	r.fill(load, w)
	if err := b.readWindowWAL(ctx, &r, w, run); err != nil {
		return r, err
	}
	if err := b.afterWindow(ctx, t, &r, w, autovac, run); err != nil {
		return r, err
	}
	r.WaitEvents, r.WaitSamples, r.ForeignActive = smp.waits, smp.samples, smp.foreign
	inner, err := smp.nonLeaves(ctx, b.db, 100)
	if err != nil {
		b.log.Warn("hot blocks may include inner pages", zap.Error(err))
	}
	r.HotBlocks, r.RightEdgeShare = smp.hottest(5, func(i uint32, blk int64) bool { return !inner[blockKey{i, blk}] })
	r.judge(b.cfg.KeepDisturbed)
	return r, nil
}

// openWindow creates the run's WAL slot, reads the guards' counts and
// then the window's start.
func (b *bencher) openWindow(ctx context.Context, t *table) (*window, error) {
	w := &window{}
	var err error
	if b.wal != nil {
		if w.slot, err = createWALSlot(ctx, b.db, b.walSlotName()); err != nil {
			return nil, err
		}
	}
	v := b.res.Settings.ServerVersionNum
	if w.ckpt0, err = checkpoints(ctx, b.db, v); err != nil {
		return nil, err
	}
	if w.autovac0, err = autovacuumRuns(ctx, b.db, t.rel.heaps); err != nil {
		return nil, err
	}
	if w.pages0, err = pagesWritten(ctx, b.db, v); err != nil {
		return nil, err
	}
	w.start, w.fpi0, err = walPosition(ctx, b.db, b.hasStatWAL)
	return w, err
}

func (b *bencher) closeWindow(ctx context.Context, w *window) error {
	var err error
	if w.end, w.fpi1, err = walPosition(ctx, b.db, b.hasStatWAL); err != nil {
		return err
	}
	w.ckptAt, err = checkpoints(ctx, b.db, b.res.Settings.ServerVersionNum)
	return err
}

func (b *bencher) walSlotName() string { return fmt.Sprintf("%s_wal_%d", b.cfg.Slot, os.Getpid()) }

// readWindowWAL counts the window's WAL with pg_waldump, or takes
// pg_stat_wal's counts, marked approximate, where pg_waldump cannot read
// the server's WAL; then drops the slot.
func (b *bencher) readWindowWAL(ctx context.Context, r *RunResult, w *window, run int) error {
	r.WALSource = WALSourceStatWAL
	if w.fpi0 != nil && w.fpi1 != nil {
		n := *w.fpi1 - *w.fpi0
		r.FPI = &n
	}
	if b.wal != nil {
		if err := waitFlushed(ctx, b.db, w.end); err != nil {
			return err
		}
		st, err := b.wal.dump(ctx, w.start, w.end)
		if err != nil {
			return err
		}
		r.WALSource = WALSourceWALDump
		r.WALRecords, r.WALRecordBytes, r.FPIBytes = st.Records, st.RecordBytes, st.FPIBytes
		n := st.FPI
		r.FPI = &n
		r.walStats = st
		r.ForeignWALBytes, r.ForeignFPI = st.ForeignBytes, st.ForeignFPI
		r.Checks = append(r.Checks, foreignGuard(run, st))
		if b.cfg.SelfCheck {
			c, err := b.selfCheck(ctx, r, w, run)
			if err != nil {
				return err
			}
			r.Checks = append(r.Checks, c)
		}
	}
	if r.FPI != nil && r.Rows > 0 {
		per := float64(*r.FPI) / float64(r.Rows)
		r.FPIPerRow = &per
	}
	return w.slot.drop(ctx)
}

// afterWindow is the admin work after the window: the checkpoint that
// writes every page the run dirtied, the guards that need it, the sizes.
func (b *bencher) afterWindow(ctx context.Context, t *table, r *RunResult, w *window, autovac []string, run int) error {
	v := b.res.Settings.ServerVersionNum
	if !b.cfg.NoCheckpoint {
		if err := b.checkpoint(ctx); err != nil {
			return err
		}
		after, err := pagesWritten(ctx, b.db, v)
		if err != nil {
			return err
		}
		r.PagesWritten = after - w.pages0
		if r.Rows > 0 {
			r.PagesWrittenPerRow = float64(r.PagesWritten) / float64(r.Rows)
		}
	}
	cAfter, err := checkpoints(ctx, b.db, v)
	if err != nil {
		return err
	}
	own, err := autovacuumRuns(ctx, b.db, t.rel.heaps)
	if err != nil {
		return err
	}
	r.Checkpoints = w.ckptAt - w.ckpt0
	r.AutovacuumSeen = autovac
	r.Checks = append(r.Checks, windowGuards(run, w.start, w.ckpt0, w.ckptAt, cAfter, !b.cfg.NoCheckpoint,
		r.walStats.CheckpointRedo, autovac, own-w.autovac0)...)
	sz, err := measureSizes(ctx, b.db, t.rel)
	if err != nil {
		return err
	}
	r.HeapBytes, r.IndexBytes, r.AvgLeafDensity = sz.heap, sz.index, sz.density
	return nil
}

// judge keeps a run whose checks all passed; with keepDisturbed, a run
// that failed only guards is kept and marked.
func (r *RunResult) judge(keepDisturbed bool) {
	r.Kept = true
	for _, c := range r.Checks {
		if c.Passed {
			continue
		}
		if isGuard(c.Name) {
			r.Disturbed = append(r.Disturbed, c.Name+": "+c.Detail)
			if keepDisturbed {
				continue
			}
		}
		r.Kept = false
	}
}

func errDetail(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func (r *RunResult) fill(load loadResult, w *window) {
	r.Seconds = load.elapsed.Seconds()
	r.Txns, r.Rows, r.Errors = load.txns, load.rows, load.errors
	if r.Seconds > 0 {
		r.TPS = float64(load.txns) / r.Seconds
	}
	r.LatencyMS = percentiles(load.latencies)
	r.WALStart, r.WALEnd = lsnText(w.start), lsnText(w.end)
	r.WALBytes = w.end - w.start
	if load.rows > 0 {
		r.WALBytesPerRow = float64(r.WALBytes) / float64(load.rows)
	}
}

// runChecks runs the checks the run needs, inside the window: the
// pruning a count(*) does right after the load is the workload's WAL.
func (b *bencher) runChecks(ctx context.Context, t *table, r *RunResult, l loadSpec, load loadResult, run int) error {
	if err := b.db.QueryRow(ctx, "SELECT count(*) FROM "+t.s.Qualified()).Scan(&r.TableRows); err != nil {
		return fmt.Errorf("count rows: %w", err)
	}
	if strings.HasPrefix(l.workload, "insert") {
		t.expected += load.rows
	}
	r.Checks = append(r.Checks,
		Check{Run: run, Name: "no failed transactions", Passed: load.errors == 0, Detail: failDetail(load)},
		Check{Run: run, Name: "load ran", Passed: load.txns > 0, Detail: fmt.Sprintf("%d transactions, %d rows", load.txns, load.rows)},
		Check{Run: run, Name: "exact row count", Passed: r.TableRows == t.expected,
			Detail: fmt.Sprintf("table holds %d rows, expected %d", r.TableRows, t.expected)})
	if t.s.uuidVersion > 0 {
		c, err := b.checkUUIDs(ctx, t.s, run)
		if err != nil {
			return err
		}
		r.Checks = append(r.Checks, c)
	}
	return nil
}

func failDetail(load loadResult) string {
	if load.errors == 0 {
		return "0 errors"
	}
	return fmt.Sprintf("%d failed transactions; first: %v", load.errors, load.firstErr)
}

// checkUUIDs checks the version and variant of every key in the table.
func (b *bencher) checkUUIDs(ctx context.Context, s Strategy, run int) (Check, error) {
	var total, bad int64
	err := b.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE get_byte(uuid_send(id), 6) >> 4 <> $1
		OR get_byte(uuid_send(id), 8) & 192 <> 128) FROM `+s.Qualified(), s.uuidVersion).Scan(&total, &bad)
	if err != nil {
		return Check{}, fmt.Errorf("check UUIDs: %w", err)
	}
	return Check{Run: run, Name: "uuid version and variant", Passed: bad == 0,
		Detail: fmt.Sprintf("%d of %d keys are not version %d with variant 10", bad, total, s.uuidVersion)}, nil
}

// checkSessionSettings opens every load connection and reads
// synchronous_commit back from each; the connections stay in the pool for
// the load.
func (b *bencher) checkSessionSettings(ctx context.Context, pool *pgxpool.Pool, clients, run int) Check {
	c := Check{Run: run, Name: "settings read back", Passed: true,
		Detail: fmt.Sprintf("synchronous_commit = %s on all %d load connections", b.cfg.SynchronousCommit, clients)}
	conns := make([]*pgxpool.Conn, 0, clients)
	defer func() {
		for _, cn := range conns {
			cn.Release()
		}
	}()
	for i := 0; i < clients; i++ {
		cn, err := pool.Acquire(ctx)
		if err != nil {
			return Check{Run: run, Name: c.Name, Detail: fmt.Sprintf("open load connection %d: %v", i, err)}
		}
		conns = append(conns, cn)
		var v string
		if err := cn.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&v); err != nil || v != b.cfg.SynchronousCommit {
			return Check{Run: run, Name: c.Name, Detail: fmt.Sprintf("load connection %d: synchronous_commit = %q (%v), want %q", i, v, err, b.cfg.SynchronousCommit)}
		}
	}
	b.res.Settings.SynchronousCommitLoad = b.cfg.SynchronousCommit
	return c
}

// summarize turns n runs into one entry: medians and ranges of the kept
// runs, and the median-tps run's samples.
func summarize(s Strategy, workload string, clients, fillfactor int, runs []RunResult) Entry {
	e := Entry{Strategy: s.Name, Workload: workload, Clients: clients, Fillfactor: fillfactor,
		PerRun: runs, WaitEvents: map[string]int64{}, HotBlocks: []HotBlock{}, Ranges: map[string]Spread{}}
	var kept []RunResult
	for _, r := range runs {
		e.Sanity.Checks = append(e.Sanity.Checks, r.Checks...)
		if r.Kept {
			kept = append(kept, r)
			if len(r.Disturbed) > 0 {
				e.Disturbed = append(e.Disturbed, Discard{Run: r.Run, Reason: joinReasons(r.Disturbed)})
			}
			continue
		}
		e.Discarded = append(e.Discarded, Discard{Run: r.Run, Reason: failedChecks(r.Checks)})
	}
	e.N = len(kept)
	e.Sanity.Passed = len(kept) > 0
	for _, c := range e.Sanity.Checks {
		if !c.Passed && !isGuard(c.Name) && runKept(kept, c.Run) {
			e.Sanity.Passed = false
		}
	}
	if len(kept) == 0 {
		return e
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].TPS < kept[j].TPS })
	mid := kept[len(kept)/2]
	med := func(name string, f func(RunResult) float64) float64 {
		v, sp := medianSpread(kept, f)
		e.Ranges[name] = sp
		return v
	}
	e.TPS = med("tps", func(r RunResult) float64 { return r.TPS })
	e.Spread = e.Ranges["tps"]
	e.RowsPerSecond = med("rows_per_second", func(r RunResult) float64 { return float64(r.Rows) / r.Seconds })
	e.LatencyMS = Latency{P50: med("latency_ms.p50", func(r RunResult) float64 { return r.LatencyMS.P50 }),
		P95: med("latency_ms.p95", func(r RunResult) float64 { return r.LatencyMS.P95 }),
		P99: med("latency_ms.p99", func(r RunResult) float64 { return r.LatencyMS.P99 })}
	e.WALBytesPerRow = med("wal_bytes_per_row", func(r RunResult) float64 { return r.WALBytesPerRow })
	e.PagesWrittenPerRow = med("pages_written_per_row", func(r RunResult) float64 { return r.PagesWrittenPerRow })
	if mid.FPIPerRow != nil {
		v := med("fpi_per_row", func(r RunResult) float64 {
			if r.FPIPerRow == nil {
				return 0
			}
			return *r.FPIPerRow
		})
		e.FPIPerRow = &v
	}
	e.HeapBytes = int64(med("heap_bytes", func(r RunResult) float64 { return float64(r.HeapBytes) }))
	e.IndexBytes = int64(med("index_bytes", func(r RunResult) float64 { return float64(r.IndexBytes) }))
	e.TableRows = int64(med("table_rows", func(r RunResult) float64 { return float64(r.TableRows) }))
	e.AvgLeafDensity = med("avg_leaf_density", func(r RunResult) float64 { return r.AvgLeafDensity })
	e.BytesPerRow = med("bytes_per_row", func(r RunResult) float64 { return perRow(r.IndexBytes, r.TableRows) })
	e.HeapBytesPerRow = med("heap_bytes_per_row", func(r RunResult) float64 { return perRow(r.HeapBytes, r.TableRows) })
	e.WaitEvents, e.WaitSamples, e.ForeignActive = mid.WaitEvents, mid.WaitSamples, mid.ForeignActive
	e.HotBlocks, e.RightEdgePinShare, e.Lag = mid.HotBlocks, mid.RightEdgeShare, mid.Lag
	// The samples of one run are no replicate: their spread over the runs too.
	e.BufferContentSamples = med("buffer_content_samples", func(r RunResult) float64 { return float64(r.WaitEvents["LWLock:BufferContent"]) })
	med("right_edge_pin_share", func(r RunResult) float64 { return r.RightEdgeShare })
	if mid.Lag != nil {
		lag := func(f func(*Lag) float64) func(RunResult) float64 {
			return func(r RunResult) float64 {
				if r.Lag == nil {
					return 0
				}
				return f(r.Lag)
			}
		}
		med("lag.peak_bytes", lag(func(l *Lag) float64 { return float64(l.PeakBytes) }))
		med("lag.peak_seconds", lag(func(l *Lag) float64 { return l.PeakSeconds }))
		med("lag.catchup_seconds", lag(func(l *Lag) float64 { return l.CatchupSeconds }))
	}
	if e.HotBlocks == nil {
		e.HotBlocks = []HotBlock{}
	}
	return e
}

func perRow(bytes, rows int64) float64 {
	if rows <= 0 {
		return 0
	}
	return float64(bytes) / float64(rows)
}

func joinReasons(rs []string) string { return strings.Join(rs, "; ") }

func runKept(kept []RunResult, run int) bool {
	return slices.ContainsFunc(kept, func(r RunResult) bool { return r.Run == run })
}

func failedChecks(checks []Check) string {
	var out string
	for _, c := range checks {
		if !c.Passed {
			if out != "" {
				out += "; "
			}
			out += c.Name + ": " + c.Detail
		}
	}
	return out
}

// medianSpread returns the median of f over the runs and its range.
func medianSpread(runs []RunResult, f func(RunResult) float64) (float64, Spread) {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	sp := Spread{Min: v[0], Max: v[len(v)-1]}
	if len(v)%2 == 1 {
		return v[len(v)/2], sp
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, sp
}
