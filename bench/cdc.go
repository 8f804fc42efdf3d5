package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
)

// The replication objects the benchmark owns.
const (
	cdcPublication = "ferry_bench"
	markerTable    = Schema + ".cdc_marker"
)

// NullSink is a loader.Sink and loader.SnapshotStore that keeps nothing:
// with it the replicator decodes and batches every change as usual, so the
// lag it shows is PostgreSQL's decoding plus ferry's own work, without a
// destination's. It reports every slot's initial copy as done, so that a
// slot created by the benchmark streams from its start without a copy.
type NullSink struct {
	rows atomic.Int64
}

var (
	_ loader.Sink          = (*NullSink)(nil)
	_ loader.SnapshotStore = (*NullSink)(nil)
)

// Prepare does nothing.
func (*NullSink) Prepare(context.Context, []*schema.TableMap) error { return nil }

// Write counts the rows and drops them.
func (s *NullSink) Write(_ context.Context, b *loader.Batch) error {
	s.rows.Add(int64(len(b.Rows)))
	return nil
}

// Truncate does nothing.
func (*NullSink) Truncate(context.Context, *schema.TableMap) error { return nil }

// Close does nothing.
func (*NullSink) Close() error { return nil }

// SnapshotState says the copy is done.
func (*NullSink) SnapshotState(context.Context, string) (loader.SnapshotState, error) {
	return loader.SnapshotState{Done: true}, nil
}

// SetSnapshotState does nothing.
func (*NullSink) SetSnapshotState(context.Context, string, loader.SnapshotState) error { return nil }

// Rows is how many rows were written.
func (s *NullSink) Rows() int64 { return s.rows.Load() }

// cdc is an in-process replicator reading the strategy's table from a slot
// created after seeding, so the seed rows are never decoded.
type cdc struct {
	db     *pgxpool.Pool
	slot   string
	cancel context.CancelFunc
	done   chan error
	closer func() error
	mu     sync.Mutex
	err    error
}

func (b *bencher) startCDC(ctx context.Context, s Strategy) (*cdc, error) {
	if err := b.dropCDC(ctx); err != nil {
		return nil, err
	}
	setup := []string{
		"CREATE TABLE IF NOT EXISTS " + markerTable + " (id int PRIMARY KEY, n bigint NOT NULL)",
		// Every run updates the marker: with autovacuum on, its vacuum or
		// analyze falls into a window every few dozen runs.
		"ALTER TABLE " + markerTable + " SET (autovacuum_enabled = off)",
		"INSERT INTO " + markerTable + " VALUES (1, 0) ON CONFLICT DO NOTHING",
		"CREATE PUBLICATION " + cdcPublication + " FOR TABLE " + s.Qualified() + ", " + markerTable +
			" WITH (publish_via_partition_root = true)",
	}
	for _, q := range setup {
		if _, err := b.db.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("set up replication: %w", err)
		}
	}
	var consistent string
	if err := b.db.QueryRow(ctx, `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`, b.cfg.Slot).Scan(&consistent); err != nil {
		return nil, fmt.Errorf("create slot %s: %w", b.cfg.Slot, err)
	}
	sink, store, caps, retryable, closer, err := b.openCDCSink(ctx, consistent)
	if err != nil {
		return nil, err
	}
	rep, err := replicator.New(replicator.Config{
		ConnString:  b.cfg.ConnString,
		Slot:        b.cfg.Slot,
		Publication: cdcPublication,
		Tables:      []string{s.Qualified(), markerTable},
		Logger:      b.log.Named("cdc"),
	}, sink, store, caps, retryable)
	if err != nil {
		closer() //nolint:errcheck // the error that matters is New's
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	c := &cdc{db: b.db, slot: b.cfg.Slot, cancel: cancel, done: make(chan error, 1), closer: closer}
	go func() { c.done <- rep.Run(rctx) }()
	if _, err := c.waitCaughtUp(ctx, 2*time.Minute); err != nil {
		c.stop()
		return nil, fmt.Errorf("replicator did not start streaming: %w", err)
	}
	return c, nil
}

// openCDCSink returns the null sink, or ClickHouse when a URL is set.
func (b *bencher) openCDCSink(ctx context.Context, consistent string) (loader.Sink, loader.SnapshotStore, schema.Capabilities, func(error) bool, func() error, error) {
	if b.cfg.ClickHouseURL == "" {
		ns := &NullSink{}
		caps := schema.CapabilitiesFor(99, 0)
		return ns, ns, caps, nil, ns.Close, nil
	}
	ch, err := clickhouse.New(ctx, clickhouse.Config{DSN: b.cfg.ClickHouseURL, Database: Schema, Logger: b.log.Named("cdc")})
	if err != nil {
		return nil, nil, schema.Capabilities{}, nil, nil, err
	}
	// The slot is new and the table's seed rows are not wanted in
	// ClickHouse: mark the copy done so the replicator streams from the
	// slot's start.
	if err := ch.SetSnapshotState(ctx, b.cfg.Slot, loader.SnapshotState{Done: true, LSN: consistent}); err != nil {
		ch.Close() //nolint:errcheck // the error that matters is the one above
		return nil, nil, schema.Capabilities{}, nil, nil, fmt.Errorf("mark the copy done: %w", err)
	}
	b.res.Machine.ClickHouse = ch.ServerVersion()
	return ch, ch, ch.Capabilities(), clickhouse.IsRetryable, ch.Close, nil
}

// mark commits a change into the stream: once the slot confirms it,
// everything committed before it is stored. A target read with
// pg_current_wal_insert_lsn() before the mark is behind the mark's commit.
func (c *cdc) mark(ctx context.Context) error {
	if _, err := c.db.Exec(ctx, `UPDATE `+markerTable+` SET n = n + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("write the catch-up mark: %w", err)
	}
	return nil
}

// waitCaughtUp marks the stream and waits until the slot confirms the mark,
// returning when that happened.
func (c *cdc) waitCaughtUp(ctx context.Context, timeout time.Duration) (time.Time, error) {
	target, _, err := walPosition(ctx, c.db, false)
	if err != nil {
		return time.Time{}, err
	}
	if err := c.mark(ctx); err != nil {
		return time.Time{}, err
	}
	return c.waitConfirmed(ctx, target, timeout)
}

func (c *cdc) waitConfirmed(ctx context.Context, target int64, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case err := <-c.done:
			c.setErr(err)
			return time.Time{}, fmt.Errorf("replicator stopped: %w", c.runErr())
		default:
		}
		confirmed, err := c.confirmed(ctx)
		if err != nil {
			return time.Time{}, err
		}
		if confirmed >= target {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("slot %s not caught up after %s (%d bytes behind)", c.slot, timeout, target-confirmed)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *cdc) confirmed(ctx context.Context) (int64, error) {
	var n *int64
	err := c.db.QueryRow(ctx, `SELECT pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')::bigint FROM pg_replication_slots WHERE slot_name = $1`, c.slot).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read slot %s: %w", c.slot, err)
	}
	if n == nil {
		return 0, nil
	}
	return *n, nil
}

func (c *cdc) setErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		err = errors.New("returned without an error")
	}
	if c.err == nil {
		c.err = err
	}
}

func (c *cdc) runErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// stop ends the replicator and closes its sink.
func (c *cdc) stop() {
	c.cancel()
	select {
	case err := <-c.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			c.setErr(err)
		}
	case <-time.After(time.Minute):
	}
	c.closer() //nolint:errcheck // nothing is buffered in either sink
}

// dropCDC removes the slot and publication a previous run left. The
// server sees the in-process ferry's walsender end a moment after ferry
// closed its connection, and an active slot cannot be dropped, so it
// waits for the slot to go idle (a busy server took over a second).
func (b *bencher) dropCDC(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var active bool
		err := b.db.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, b.cfg.Slot).Scan(&active)
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err != nil {
			return fmt.Errorf("drop the benchmark's replication slot %s: %w", b.cfg.Slot, err)
		}
		if !active {
			_, err := b.db.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, b.cfg.Slot)
			if err == nil {
				break
			}
			if time.Now().After(deadline) { // else it became active again, or another drop won
				return fmt.Errorf("drop the benchmark's replication slot %s: %w", b.cfg.Slot, err)
			}
		} else if time.Now().After(deadline) {
			return fmt.Errorf("drop the benchmark's replication slot %s: still in use 2 minutes after the benchmark's replication stopped", b.cfg.Slot)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := b.db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+cdcPublication); err != nil {
		return fmt.Errorf("drop the benchmark's replication objects: %w", err)
	}
	return nil
}

// lagSampler records the slot's lag four times a second.
type lagSampler struct {
	start   time.Time
	points  []lagPoint
	stop    chan struct{}
	done    sync.WaitGroup
	err     error
	samples []LagSample
}

type lagPoint struct {
	at                 time.Time
	current, confirmed int64
}

func startLagSampler(ctx context.Context, db *pgxpool.Pool, slot string, start time.Time) *lagSampler {
	l := &lagSampler{start: start, stop: make(chan struct{})}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			var p lagPoint
			err := db.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint,
				coalesce(pg_wal_lsn_diff(confirmed_flush_lsn, '0/0'), 0)::bigint FROM pg_replication_slots WHERE slot_name = $1`,
				slot).Scan(&p.current, &p.confirmed)
			p.at = time.Now()
			if err != nil && l.err == nil && ctx.Err() == nil {
				l.err = fmt.Errorf("sample replication lag: %w", err)
			} else if err == nil {
				l.points = append(l.points, p)
			}
			select {
			case <-ctx.Done():
				return
			case <-l.stop:
				return
			case <-t.C:
			}
		}
	}()
	return l
}

// finish stops sampling and turns the points into lag in bytes and in
// seconds. A point's lag in seconds is how long ago the WAL insert position
// passed the position the slot has confirmed: the age of the oldest WAL not
// yet stored, to the sampling's resolution (250 ms).
func (l *lagSampler) finish(loadEnd, caughtUp time.Time) (*Lag, error) {
	close(l.stop)
	l.done.Wait()
	lag := &Lag{}
	if !caughtUp.IsZero() {
		lag.CatchupSeconds = caughtUp.Sub(loadEnd).Seconds()
	}
	j := 0
	for _, p := range l.points {
		s := LagSample{T: p.at.Sub(l.start).Seconds(), Bytes: max(0, p.current-p.confirmed)}
		for j < len(l.points) && l.points[j].current <= p.confirmed {
			j++
		}
		if s.Bytes > 0 && j < len(l.points) {
			s.Seconds = p.at.Sub(l.points[j].at).Seconds()
		}
		lag.PeakBytes = max(lag.PeakBytes, s.Bytes)
		lag.PeakSeconds = max(lag.PeakSeconds, s.Seconds)
		lag.Samples = append(lag.Samples, s)
	}
	return lag, l.err
}
