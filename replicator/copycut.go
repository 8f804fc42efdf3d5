package replicator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// A copy taken while the stream runs (a table that joins, a rebuild, a
// table copied again at a restart) reads the table under a snapshot of its
// own, while the stream sits at some earlier point. The stream is in commit
// order, and the snapshot holds exactly the transactions that had committed
// when it was taken, so the stream still brings transactions the copy
// holds (those that committed before the snapshot) and ones it does not
// (those that commit after it, whose changes may have lower WAL positions
// than the trigger, since a transaction may change rows long before it
// commits).
//
// So a copy's rows get a version below every change of a transaction the
// snapshot does not hold: just below the slot's restart position, which
// PostgreSQL keeps at or before the first change of every transaction that
// commits after the confirmed position (the stream waits while the copy
// runs, so it confirms nothing past the trigger). And the stream leaves out
// a copied table's changes of the transactions the snapshot holds: the copy
// has them already, and an append-only table, which keeps every row, would
// otherwise hold them twice. The cut is kept with the table's stored state,
// so that a restart that receives those transactions again leaves them out
// too.

// copyCut tells which transactions a copy's snapshot holds.
type copyCut struct {
	// End is the WAL insert position read after the snapshot was taken:
	// every transaction the snapshot holds committed before it, so a
	// transaction committing at or after End is not held, and once the
	// stream is past End the cut decides nothing.
	End uint64 `json:"end"`
	// Xmax and Xip are the snapshot's: a transaction id below Xmax and not
	// in Xip had ended when it was taken (the stream brings only committed
	// ones). 32-bit ids as pgoutput sends them; within the cut's span of
	// WAL they cannot wrap around.
	Xmax uint32   `json:"xmax"`
	Xip  []uint32 `json:"xip"`
}

// holds reports whether the copy holds transaction xid, which commits at
// commit.
func (c *copyCut) holds(xid uint32, commit pglogrepl.LSN) bool {
	if c == nil || uint64(commit) >= c.End {
		return false
	}
	if int32(xid-c.Xmax) >= 0 { // xid is Xmax or later: it began after the snapshot
		return false
	}
	return !slices.Contains(c.Xip, xid)
}

// readCut reads the cut of the snapshot of conn's transaction, which must
// already have taken it (REPEATABLE READ takes it at its first query), and
// the version for the copy's rows, from the slot's restart position.
func readCut(ctx context.Context, conn *pgx.Conn, slot string) (*copyCut, uint64, error) {
	var snap string
	var end, restart pglogrepl.LSN
	// txid_current_snapshot, not pg_current_snapshot: it exists on every
	// version ferry runs on.
	err := conn.QueryRow(ctx, `SELECT txid_current_snapshot()::text, pg_current_wal_insert_lsn()::text,
		coalesce((SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = $1), '0/0')::text`, slot).
		Scan(&snap, lsnScanner{&end}, lsnScanner{&restart})
	if err != nil {
		return nil, 0, fmt.Errorf("read the copy's snapshot: %w", err)
	}
	c, err := parseCut(snap)
	if err != nil {
		return nil, 0, err
	}
	c.End = uint64(end)
	if err := waitFlushed(ctx, conn, end); err != nil {
		return nil, 0, err
	}
	return c, max(uint64(restart), 1) - 1, nil
}

// flushWait bounds waitFlushed: the WAL writer flushes an asynchronous
// commit within three times wal_writer_delay, which is at most 10 s.
const flushWait = 2 * time.Minute

// waitFlushed returns once PostgreSQL has flushed its WAL up to end.
//
// A snapshot sees a transaction as soon as it commits, but with
// synchronous_commit = off the commit is durable only once the WAL writer
// flushes it, a fraction of a second later. A copy that read such a
// transaction's rows, if PostgreSQL then crashed and lost it, would leave
// ClickHouse with rows the transaction inserted and without those it
// deleted or moved, and nothing in the stream would ever undo them. After
// the crash PostgreSQL may also give a later transaction the lost one's
// id, and write its commit below end, which the cut would take for one
// the copy holds. Waiting until everything before end, which holds every
// commit the snapshot sees, is on disk rules both out: a crash from then
// on keeps them. (The initial copy's snapshot is the slot's, which
// PostgreSQL builds from WAL it has flushed.)
func waitFlushed(ctx context.Context, conn *pgx.Conn, end pglogrepl.LSN) error {
	deadline := time.Now().Add(flushWait)
	for {
		var flushed pglogrepl.LSN
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text`).Scan(lsnScanner{&flushed}); err != nil {
			return fmt.Errorf("read the flushed WAL position: %w", err)
		}
		if flushed >= end {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL has not flushed its WAL up to %s, where the copy's snapshot was taken, in %s (flushed: %s)", end, flushWait, flushed)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// parseCut reads a txid_snapshot's text form, xmin:xmax:xip,xip,…
func parseCut(snap string) (*copyCut, error) {
	parts := strings.Split(snap, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("read the copy's snapshot %q: want xmin:xmax:xip", snap)
	}
	xmax, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("read the copy's snapshot %q: %w", snap, err)
	}
	c := &copyCut{Xmax: uint32(xmax)}
	if parts[2] != "" {
		for _, s := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("read the copy's snapshot %q: %w", snap, err)
			}
			c.Xip = append(c.Xip, uint32(x))
		}
	}
	return c, nil
}
