package replicator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// A resync asked for with `ferry resync` copies its table beside the
// stream where the sink can (loader.LiveRebuilder): the other tables, and
// this one, keep streaming while the copy runs.
//
// The copy fills a shadow table under a snapshot of its own, as a rebuild
// does, and its rows get the same version, below every change of a
// transaction the snapshot does not hold (see copycut.go): the slot stays
// confirmed no further than the end of the last transaction before the
// request until the shadow is swapped in, so that PostgreSQL's restart
// position stays at or before the first change of every such transaction,
// and a crash before the swap meets the request again. The stream goes on
// writing the table's changes to the table replicated so far, and writes
// those of the transactions the copy does not hold to the shadow too, in
// stream order, from the moment the copy's snapshot is taken; the versions
// decide between them and the copy's rows, whichever is written first.
// Once the copy has ended, the stream writes what it holds and swaps the
// shadow in.
//
// An update that leaves a TOASTed value unchanged takes it from the
// shadow's stored row, which the copy may not have written yet: the
// stream then waits for the copy (see awaitCopies), as every resync did
// before. Anything else that concerns the table (a schema change, a
// TRUNCATE, another resync request) waits for the copy and the swap too
// (settleResync), and the table is then handled as it is after the swap.
// The table is copied in the shape the stream knows (see stream.resync): a
// catalog ahead of it makes the copy stale, and the change, when the stream
// meets it, rebuilds the table again. A partitioned table, one that waits
// for its copy after it came back to the publication, and the Kafka sink
// are copied with the stream waiting, as before.

// resyncPoll is how often the stream looks whether a copy beside it ended.
const resyncPoll = 500 * time.Millisecond

// liveResync is a copy running beside the stream.
type liveResync struct {
	old    *relation        // the table as replicated until the swap
	next   *relation        // the table after it; the copy sets its cut and state
	shadow *schema.TableMap // the table the copy and the stream fill
	// hold is the end of the last transaction received before the
	// request: the slot is not confirmed past it until the swap.
	hold  pglogrepl.LSN
	cut   *copyCut // which transactions the copy holds; set before started closes
	start time.Time

	cancel  context.CancelFunc
	started chan struct{} // closed once the copy's snapshot is taken and the shadow emptied
	done    chan struct{} // closed once the copy ended; err is then its result
	err     error
}

// resyncLive starts a resync of rel beside the stream, where it can be
// one; ok is false where the stream must wait for it (see above).
func (s *stream) resyncLive(ctx context.Context, rel *relation, d described, version uint64) (ok bool, err error) {
	if lr, can := s.sink.(loader.LiveRebuilder); !can || !lr.RebuildsLive() {
		return false, nil
	}
	if _, can := s.sink.(loader.Evolver); !can {
		return false, nil
	}
	if rel.stale || rel.recopy != "" || len(rel.partitions) > 0 || len(rel.doc.Leaves) > 0 || version < rel.shapedAt {
		return false, nil
	}
	d.table.Columns = slices.Clone(d.table.Columns) // fit marks text columns in place; the caller's d stays as it was
	if err := s.fit(rel, &d); err != nil {
		return false, err
	}
	if !reflect.DeepEqual(rel.tm.Source, d.table) || len(d.partitions) > 0 {
		return false, nil // not the shape the stream knows: the rebuild, with the stream waiting, sorts it out
	}
	next, err := s.nextRelation(rel, d)
	if err != nil {
		return false, err
	}
	next.shapedAt = max(rel.shapedAt, version)
	next.keyNullsApart()
	shadow, err := s.makeShadow(ctx, next.tm, version)
	if err != nil {
		return false, err
	}
	cctx, cancel := context.WithCancel(ctx)
	lr := &liveResync{old: rel, next: next, shadow: shadow, hold: s.lastEnd, start: time.Now(),
		cancel: cancel, started: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		lr.err = s.rep.copyUnder(cctx, next, shadow, func(c *copyCut) {
			lr.cut = c
			close(lr.started)
		})
	}()
	// Short: the table's lock and a snapshot. No change of the table may
	// reach the stream before the cut that tells where it goes.
	if err := s.await(ctx, lr.started, lr.done); err != nil {
		lr.stop()
		return false, err
	}
	select {
	case <-lr.started:
	default:
		cancel()
		return false, fmt.Errorf("resync %s: %w", rel.ref, lr.err)
	}
	if s.resyncs == nil {
		s.resyncs = map[uint32]*liveResync{}
	}
	s.resyncs[rel.ref.OID] = lr
	s.log.Info("resync: the stream goes on while the copy runs; the shadow table is swapped in when the copy ends",
		zap.Stringer("table", rel.ref), zap.String("clickhouse_table", rel.tm.Name), zap.String("shadow", shadow.Name))
	return true, nil
}

// shadowRow queues row, just added for the table replicated so far, for
// the shadow too, unless the copy holds its transaction.
func (s *stream) shadowRow(lr *liveResync, row loader.Row, size int) error {
	if lr.cut.holds(s.txID, s.txCommit) {
		return nil
	}
	if lr.next.tm.Source.FullRow && lr.next.tm.Source.DistinctNull != lr.old.tm.Source.DistinctNull {
		row.RowKey = "" // the copy keys NULLs apart (see keyNullsApart)
		if err := lr.next.setRowKey(&row); err != nil {
			return err
		}
	}
	s.batch.Add(lr.shadow, row, size)
	return nil
}

// resyncHold is the furthest the slot may be confirmed while copies run
// beside the stream; ok is false when none does.
func (s *stream) resyncHold() (hold pglogrepl.LSN, ok bool) {
	hold, ok = s.stoppedHold, s.stopped
	for _, lr := range s.resyncs {
		if !ok || lr.hold < hold {
			hold, ok = lr.hold, true
		}
	}
	return hold, ok
}

// pollResyncs swaps in the tables whose copies have ended.
func (s *stream) pollResyncs(ctx context.Context) error {
	for oid, lr := range s.resyncs {
		select {
		case <-lr.done:
			if err := s.finishResync(ctx, oid, lr); err != nil {
				return err
			}
		default:
		}
	}
	return nil
}

// settleResync waits for the copy of a table running beside the stream, if
// any, and swaps it in.
func (s *stream) settleResync(ctx context.Context, oid uint32) error {
	lr := s.resyncs[oid]
	if lr == nil {
		return nil
	}
	s.log.Info("a change of the table waits for its resync's copy to end", zap.Stringer("table", lr.old.ref))
	if err := s.await(ctx, lr.done, nil); err != nil {
		return err
	}
	return s.finishResync(ctx, oid, lr)
}

// finishResync swaps in a shadow whose copy has ended, once every change
// received is written to it.
func (s *stream) finishResync(ctx context.Context, oid uint32, lr *liveResync) error {
	if lr.err != nil {
		return fmt.Errorf("resync %s: %w", lr.old.ref, lr.err)
	}
	if err := s.flush(ctx); err != nil {
		return err
	}
	ev, err := s.evolver()
	if err != nil {
		return err
	}
	if err := ev.SwapTable(ctx, lr.next.tm, lr.shadow); err != nil {
		return fmt.Errorf("resync %s: %w", lr.old.ref, err)
	}
	delete(s.resyncs, oid)
	next, old := lr.next, s.byOID[oid]
	// What the stream changed of the table's state meanwhile.
	next.member, next.truncated = old.member, old.truncated
	s.byOID[oid] = next
	if err := s.rep.saveState(ctx, next); err != nil {
		return err
	}
	if next.stale {
		conn, err := s.pg(ctx)
		if err != nil {
			return err
		}
		if err := s.rep.recheckStale(ctx, conn, next); err != nil {
			return err
		}
	}
	s.log.Info("resync done", zap.Stringer("table", next.ref), zap.Duration("took", time.Since(lr.start)), zap.Bool("beside_the_stream", true))
	return nil
}

// abandonResync stops the copy of a table running beside the stream, if
// any, and drops its shadow with the rows queued for it; why says why.
func (s *stream) abandonResync(ctx context.Context, oid uint32, why string) error {
	lr := s.resyncs[oid]
	if lr == nil {
		return nil
	}
	lr.stop()
	delete(s.resyncs, oid)
	s.batch.Drop(lr.shadow, func(*loader.Row) bool { return true })
	s.log.Warn("resync given up: "+why, zap.Stringer("table", lr.old.ref))
	return s.dropTable(ctx, lr.shadow.Name)
}

// stopResyncs stops every copy running beside the stream, and drops the
// rows queued for their shadows, when the stream ends: the slot stays
// confirmed before their requests, so the next run meets them again.
func (s *stream) stopResyncs() {
	s.stoppedHold, s.stopped = s.resyncHold()
	for oid, lr := range s.resyncs {
		lr.stop()
		s.batch.Drop(lr.shadow, func(*loader.Row) bool { return true })
		delete(s.resyncs, oid)
	}
}

func (lr *liveResync) stop() {
	lr.cancel()
	<-lr.done
}

// awaitCopies retries a flush that failed for want of a stored row to take
// an unchanged TOASTed value from, once every copy running beside the
// stream has ended: the row may be one a copy had not written yet.
func (s *stream) awaitCopies(ctx context.Context, err error) error {
	if !errors.Is(err, loader.ErrNoUnchangedValue) || len(s.resyncs) == 0 {
		return err
	}
	for _, lr := range s.resyncs {
		s.log.Info("an update that left a TOASTed value unchanged waits for the resync's copy of its table to end",
			zap.Stringer("table", lr.old.ref))
		if err := s.await(ctx, lr.done, nil); err != nil {
			return err
		}
		if lr.err != nil {
			return fmt.Errorf("resync %s: %w", lr.old.ref, lr.err)
		}
	}
	return s.flushWithRetry(ctx)
}

// await waits until a or b (which may be nil) is closed, answering the
// server meanwhile so that wal_sender_timeout does not end the connection.
func (s *stream) await(ctx context.Context, a, b <-chan struct{}) error {
	t := time.NewTicker(s.cfg.StandbyInterval)
	defer t.Stop()
	for {
		select {
		case <-a:
			return nil
		case <-b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := s.sendStatus(false); err != nil {
				return err
			}
		}
	}
}
