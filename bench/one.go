package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// entry runs one strategy × workload × client count n times and sums it up.
// combo numbers the workload × client count within the strategy, so that
// every run's key streams are its own.
func (b *bencher) entry(ctx context.Context, t *table, workload string, clients, combo int) (Entry, error) {
	var runs []RunResult
	for i := 1; i <= b.cfg.Runs; i++ {
		b.cfg.Progress(b.done, b.total, fmt.Sprintf("%s %s c=%d run %d/%d", t.s.Name, workload, clients, i, b.cfg.Runs))
		r, err := b.runOne(ctx, t, loadSpec{strategy: t.s, workload: workload, clients: clients, duration: b.cfg.Duration,
			batch: b.cfg.BatchRows, payload: b.payload(), keys: t.keys, seed: b.cfg.KeySeed,
			stream0: 1 + (combo*maxRuns+i)*maxClients, clock: b.cfg.Clock}, i)
		if err != nil {
			return Entry{}, err
		}
		runs = append(runs, r)
		b.done++
		b.cfg.Progress(b.done, b.total, fmt.Sprintf("%s %s c=%d run %d: %.0f tps", t.s.Name, workload, clients, i, r.TPS))
	}
	return summarize(t.s, workload, clients, b.res.Settings.Fillfactor[t.s.Name], runs), nil
}

// runOne is one timed run and its measurements.
func (b *bencher) runOne(ctx context.Context, t *table, l loadSpec, run int) (RunResult, error) {
	r := RunResult{Run: run}
	if !b.cfg.NoCheckpoint {
		if _, err := b.db.Exec(ctx, "CHECKPOINT"); err != nil {
			return r, fmt.Errorf("checkpoint: %w", err)
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
	r.Checks = append(r.Checks, b.checkSessionSettings(ctx, pool, l.clients, run))
	wal0, fpi0, err := walPosition(ctx, b.db, b.hasStatWAL)
	if err != nil {
		return r, err
	}
	pages0, err := pagesWritten(ctx, b.db, b.res.Settings.ServerVersionNum)
	if err != nil {
		return r, err
	}
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
	var mark int64
	if t.cdc != nil {
		if mark, err = t.cdc.mark(ctx); err != nil {
			return r, err
		}
	}
	pool.Close()
	if err := b.waitLoadGone(ctx); err != nil {
		return r, err
	}
	wal1, fpi1, err := walPosition(ctx, b.db, b.hasStatWAL)
	if err != nil {
		return r, err
	}
	if t.cdc != nil {
		caught, err := t.cdc.waitConfirmed(ctx, mark, 5*time.Minute)
		r.Checks = append(r.Checks, Check{Run: run, Name: "cdc caught up", Passed: err == nil, Detail: errDetail(err, "slot confirmed the end-of-load mark")})
		if r.Lag, err = lags.finish(load.ended, caught); err != nil {
			return r, err
		}
	}
	if err := b.countPageWrites(ctx, &r, pages0, load.rows); err != nil {
		return r, err
	}
	r.fill(load, wal1-wal0, fpi0, fpi1)
	r.WaitEvents, r.WaitSamples, r.ForeignActive = smp.waits, smp.samples, smp.foreign
	r.HotBlocks, r.RightEdgeShare = smp.hottest(5)
	if err := b.afterRun(ctx, t, &r, l, load, run); err != nil {
		return r, err
	}
	r.Kept = true
	for _, c := range r.Checks {
		r.Kept = r.Kept && c.Passed
	}
	return r, nil
}

// countPageWrites checkpoints after the load, so that every page the run
// dirtied is written, and counts the pages written since before the load:
// seed 002's page-write count, cluster-wide.
func (b *bencher) countPageWrites(ctx context.Context, r *RunResult, before, rows int64) error {
	if b.cfg.NoCheckpoint {
		return nil
	}
	if _, err := b.db.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	after, err := pagesWritten(ctx, b.db, b.res.Settings.ServerVersionNum)
	if err != nil {
		return err
	}
	r.PagesWritten = after - before
	if rows > 0 {
		r.PagesWrittenPerRow = float64(r.PagesWritten) / float64(rows)
	}
	return nil
}

func errDetail(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func (r *RunResult) fill(load loadResult, wal int64, fpi0, fpi1 *int64) {
	r.Seconds = load.elapsed.Seconds()
	r.Txns, r.Rows, r.Errors = load.txns, load.rows, load.errors
	if r.Seconds > 0 {
		r.TPS = float64(load.txns) / r.Seconds
	}
	r.LatencyMS = percentiles(load.latencies)
	r.WALBytes = wal
	if load.rows > 0 {
		r.WALBytesPerRow = float64(wal) / float64(load.rows)
	}
	if fpi0 != nil && fpi1 != nil {
		n := *fpi1 - *fpi0
		r.FPI = &n
		if load.rows > 0 {
			per := float64(n) / float64(load.rows)
			r.FPIPerRow = &per
		}
	}
}

// afterRun measures the table and runs the sanity checks.
func (b *bencher) afterRun(ctx context.Context, t *table, r *RunResult, l loadSpec, load loadResult, run int) error {
	sz, err := measureSizes(ctx, b.db, t.rel)
	if err != nil {
		return err
	}
	r.HeapBytes, r.IndexBytes, r.AvgLeafDensity = sz.heap, sz.index, sz.density
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
	// Later runs are judged on their own rows, not on this run's miss.
	t.expected = r.TableRows
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

// summarize turns n runs into one entry: medians of the kept runs, and
// the median-tps run's samples.
func summarize(s Strategy, workload string, clients, fillfactor int, runs []RunResult) Entry {
	e := Entry{Strategy: s.Name, Workload: workload, Clients: clients, Fillfactor: fillfactor,
		PerRun: runs, WaitEvents: map[string]int64{}, HotBlocks: []HotBlock{}}
	var kept []RunResult
	for _, r := range runs {
		e.Sanity.Checks = append(e.Sanity.Checks, r.Checks...)
		if r.Kept {
			kept = append(kept, r)
			continue
		}
		e.Discarded = append(e.Discarded, Discard{Run: r.Run, Reason: failedChecks(r.Checks)})
	}
	e.N = len(kept)
	e.Sanity.Passed = len(kept) > 0
	for _, c := range e.Sanity.Checks {
		if !c.Passed && runKept(kept, c.Run) {
			e.Sanity.Passed = false
		}
	}
	last := runs[len(runs)-1]
	e.HeapBytes, e.IndexBytes, e.TableRows, e.AvgLeafDensity = last.HeapBytes, last.IndexBytes, last.TableRows, last.AvgLeafDensity
	if last.TableRows > 0 {
		e.BytesPerRow = float64(last.IndexBytes) / float64(last.TableRows)
		e.HeapBytesPerRow = float64(last.HeapBytes) / float64(last.TableRows)
	}
	if len(kept) == 0 {
		return e
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].TPS < kept[j].TPS })
	mid := kept[len(kept)/2]
	med := func(f func(RunResult) float64) float64 { return median(kept, f) }
	e.TPS = med(func(r RunResult) float64 { return r.TPS })
	e.RowsPerSecond = med(func(r RunResult) float64 { return float64(r.Rows) / r.Seconds })
	e.LatencyMS = Latency{P50: med(func(r RunResult) float64 { return r.LatencyMS.P50 }),
		P95: med(func(r RunResult) float64 { return r.LatencyMS.P95 }), P99: med(func(r RunResult) float64 { return r.LatencyMS.P99 })}
	e.WALBytesPerRow = med(func(r RunResult) float64 { return r.WALBytesPerRow })
	e.PagesWrittenPerRow = med(func(r RunResult) float64 { return r.PagesWrittenPerRow })
	if mid.FPIPerRow != nil {
		v := med(func(r RunResult) float64 {
			if r.FPIPerRow == nil {
				return 0
			}
			return *r.FPIPerRow
		})
		e.FPIPerRow = &v
	}
	e.Spread = Spread{Min: kept[0].TPS, Max: kept[len(kept)-1].TPS}
	e.WaitEvents, e.WaitSamples, e.ForeignActive = mid.WaitEvents, mid.WaitSamples, mid.ForeignActive
	e.HotBlocks, e.RightEdgePinShare, e.Lag = mid.HotBlocks, mid.RightEdgeShare, mid.Lag
	if e.HotBlocks == nil {
		e.HotBlocks = []HotBlock{}
	}
	return e
}

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

func median(runs []RunResult, f func(RunResult) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
