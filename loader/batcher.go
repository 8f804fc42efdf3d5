package loader

import (
	"context"
	"slices"
	"time"

	"github.com/ferry-cdc/ferry/schema"
)

// Batcher holds rows per table until a flush writes them, one Sink.Write
// per table. It bounds memory: Full reports when the rows or their
// estimated size reach the limits, and Due when the oldest row waited long
// enough. A flush writes every table's rows, so after it returns nil
// nothing received before it is still only in memory.
//
// A Batcher is used by one goroutine.
type Batcher struct {
	sink     Sink
	maxRows  int
	maxBytes int
	maxAge   time.Duration

	pending []*Batch // in the order tables first got a row
	index   map[*schema.TableMap]*Batch
	last    *Batch // the batch of the last row added, pending; nil when none
	// sizes holds each table's rows in its last batch written: its next
	// batch starts with room for as many (growing the slice row by row
	// was 8 % of a catch-up's CPU).
	sizes map[*schema.TableMap]int
	rows  int
	bytes int
	since time.Time // when the oldest pending row arrived
}

// NewBatcher returns a Batcher writing to sink. Limits of zero or less mean
// no limit of that kind.
func NewBatcher(sink Sink, maxRows, maxBytes int, maxAge time.Duration) *Batcher {
	return &Batcher{sink: sink, maxRows: maxRows, maxBytes: maxBytes, maxAge: maxAge,
		index: map[*schema.TableMap]*Batch{}, sizes: map[*schema.TableMap]int{}}
}

// Add queues a row of tm; size is its estimated size in bytes.
func (b *Batcher) Add(tm *schema.TableMap, r Row, size int) {
	batch := b.last
	if batch == nil || batch.Table != tm { // rows mostly come in runs of one table
		batch = b.index[tm]
		if batch == nil {
			batch = &Batch{Table: tm, Rows: make([]Row, 0, b.sizes[tm])}
			b.index[tm] = batch
			b.pending = append(b.pending, batch)
		}
		b.last = batch
	}
	if b.rows == 0 {
		b.since = time.Now()
	}
	batch.Rows = append(batch.Rows, r)
	b.rows++
	b.bytes += size
}

// Len is the number of rows pending.
func (b *Batcher) Len() int { return b.rows }

// Full reports whether a size limit is reached.
func (b *Batcher) Full() bool {
	return (b.maxRows > 0 && b.rows >= b.maxRows) || (b.maxBytes > 0 && b.bytes >= b.maxBytes)
}

// Deadline is when the pending rows are due; the zero time when none are.
func (b *Batcher) Deadline() time.Time {
	if b.rows == 0 || b.maxAge <= 0 {
		return time.Time{}
	}
	return b.since.Add(b.maxAge)
}

// Due reports whether the oldest pending row has waited MaxAge.
func (b *Batcher) Due(now time.Time) bool {
	d := b.Deadline()
	return !d.IsZero() && !now.Before(d)
}

// Flush writes every pending batch. On error the batches not yet written
// stay pending (those written are dropped: writing them again would be
// harmless, as versions make writes idempotent, but needless), so calling
// Flush again retries.
func (b *Batcher) Flush(ctx context.Context) error {
	b.last = nil
	for len(b.pending) > 0 {
		batch := b.pending[0]
		if err := b.sink.Write(ctx, batch); err != nil {
			return err
		}
		b.rows -= len(batch.Rows)
		if len(b.sizes) > 10000 {
			clear(b.sizes) // tables replaced by schema changes keep no room for ever
		}
		b.sizes[batch.Table] = len(batch.Rows)
		delete(b.index, batch.Table)
		b.pending = b.pending[1:]
	}
	b.pending = b.pending[:0]
	b.rows, b.bytes = 0, 0
	return nil
}

// Drop removes the pending rows of tm for which drop returns true, keeping
// the others in order, and returns how many it removed. The size estimate
// is left as it was: it only makes the next flush come sooner.
func (b *Batcher) Drop(tm *schema.TableMap, drop func(*Row) bool) int {
	batch := b.index[tm]
	if batch == nil {
		return 0
	}
	kept := batch.Rows[:0]
	for i := range batch.Rows {
		if !drop(&batch.Rows[i]) {
			kept = append(kept, batch.Rows[i])
		}
	}
	n := len(batch.Rows) - len(kept)
	clear(batch.Rows[len(kept):])
	batch.Rows = kept
	b.rows -= n
	if len(kept) == 0 {
		if b.last == batch {
			b.last = nil
		}
		delete(b.index, tm)
		b.pending = slices.DeleteFunc(b.pending, func(p *Batch) bool { return p == batch })
	}
	return n
}
