package replicator

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// visibleWait bounds awaitVisible. A committed transaction leaves the
// server's list of running ones a moment after its commit record is on
// disk; only a server starved of CPU makes that moment long.
const visibleWait = time.Minute

// awaitVisible returns once the transaction the stream is receiving is
// visible to a new snapshot on conn. The stream decodes a transaction as
// soon as its commit record is flushed, which PostgreSQL does before it
// takes the transaction out of its list of running ones: a catalog read
// made in between does not see what the transaction did. A table it
// created and published would then look unpublished to join, and be
// skipped for good (TestTableObserver met it on a loaded machine).
func (s *stream) awaitVisible(ctx context.Context, conn *pgx.Conn) error {
	if !s.inTx || s.txID == 0 {
		return nil
	}
	deadline := time.Now().Add(visibleWait)
	for {
		visible, err := xidVisible(ctx, conn, s.txID)
		if err != nil {
			return err
		}
		if visible {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("transaction %d, whose commit the stream received, is still not visible to a new snapshot after %s", s.txID, visibleWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// xidVisible tells whether transaction xid (32 bits, as pgoutput sends it)
// has ended for a snapshot taken now. Its 64-bit form takes the epoch of
// the snapshot's xmax, one less when xid is above xmax's low half (it was
// given out before the counter wrapped).
func xidVisible(ctx context.Context, conn *pgx.Conn, xid uint32) (bool, error) {
	var visible bool
	err := conn.QueryRow(ctx, `SELECT pg_visible_in_snapshot((x - CASE WHEN $1::bigint > x % 4294967296 THEN 4294967296 ELSE 0 END
			- x % 4294967296 + $1::bigint)::text::xid8, snap)
		FROM (SELECT pg_current_snapshot() AS snap) s, LATERAL (SELECT pg_snapshot_xmax(snap)::text::bigint AS x) m`, int64(xid)).Scan(&visible)
	if err != nil {
		return false, fmt.Errorf("read whether transaction %d is visible: %w", xid, err)
	}
	return visible, nil
}
