package replicator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// ErrSlotLost is wrapped by the error Run returns when PostgreSQL has
// invalidated the slot: the WAL it needed is gone, and only a new initial
// copy can bring ClickHouse back in line.
var ErrSlotLost = errors.New("replication slot invalidated")

// SlotObserver may be implemented by an Observer to be told what the slot
// watcher reads every Config.SlotWatch.
type SlotObserver interface {
	// SlotHealth reports one reading. It is called from the watcher's
	// goroutine, not the replicator's.
	SlotHealth(h SlotHealth)
}

// SlotHealth is one reading of the slot in pg_replication_slots.
type SlotHealth struct {
	// Active is whether a walsender streams from the slot.
	Active bool
	// WALStatus is pg_replication_slots.wal_status: reserved, extended,
	// unreserved or lost.
	WALStatus string
	// RetainedBytes is the WAL the slot keeps on the server's disk:
	// pg_current_wal_lsn() - restart_lsn.
	RetainedBytes int64
	// OverLimit is set when RetainedBytes exceeds Config.MaxRetainedWAL.
	OverLimit bool
	// Unlimited is set when max_slot_wal_keep_size is -1, so the slot may
	// fill the disk if ferry stops for long.
	Unlimited bool
}

// slotLost is the error for an invalidated slot, with the way out.
func slotLost(slot string) error {
	return fmt.Errorf("slot %s: %w: PostgreSQL removed WAL the slot still needed (max_slot_wal_keep_size). "+
		"Resync: run `ferry teardown --yes --slot %s` (or SELECT pg_drop_replication_slot('%s')), then start ferry again, which copies every table anew",
		slot, ErrSlotLost, slot, slot)
}

// watchSlot reads the slot's health every Config.SlotWatch until ctx is
// done. It warns when the slot retains too much WAL and returns an error
// wrapping ErrSlotLost once the slot is invalidated. Read failures are
// logged and retried: the stream reports a lost server on its own.
func (r *Replicator) watchSlot(ctx context.Context) error {
	log := r.log.With(zap.String("task", "slot-watch"))
	obs, _ := r.cfg.Observer.(SlotObserver)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	var warnedUnlimited bool
	var lastWarn time.Time
	t := time.NewTicker(r.cfg.SlotWatch)
	defer t.Stop()
	for {
		h, found, err := r.readHealth(ctx, &conn)
		switch {
		case err != nil && ctx.Err() == nil:
			r.cfg.Observer.Retry("postgres", err)
			log.Warn("could not read the slot's state; trying again", zap.Error(err))
		case err != nil:
			return nil
		case !found:
			// Not created yet (first start), or dropped behind ferry's back:
			// the stream fails on its own in the second case.
		case h.WALStatus == "lost":
			return slotLost(r.cfg.Slot)
		default:
			h.OverLimit = r.cfg.MaxRetainedWAL > 0 && h.RetainedBytes > r.cfg.MaxRetainedWAL
			if obs != nil {
				obs.SlotHealth(h)
			}
			if h.Unlimited && !warnedUnlimited {
				warnedUnlimited = true
				log.Warn("max_slot_wal_keep_size is -1 (unlimited): if ferry stops for long, its slot keeps WAL until the disk fills. "+
					"Set a limit (ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf()) and watch ferry_slot_retained_wal_bytes",
					zap.String("slot", r.cfg.Slot))
			}
			if h.OverLimit && time.Since(lastWarn) > 5*time.Minute {
				lastWarn = time.Now()
				log.Warn("the slot retains more WAL than --max-retained-wal: ferry is falling behind or ClickHouse is slow",
					zap.String("slot", r.cfg.Slot), zap.Int64("retained_bytes", h.RetainedBytes),
					zap.Int64("max_retained_bytes", r.cfg.MaxRetainedWAL), zap.String("wal_status", h.WALStatus))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// readHealth reads the slot on *conn, opening it when needed and dropping
// it after a failure.
func (r *Replicator) readHealth(ctx context.Context, conn **pgx.Conn) (SlotHealth, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if *conn == nil {
		c, err := connect(ctx, r.cfg.ConnString)
		if err != nil {
			return SlotHealth{}, false, err
		}
		*conn = c
	}
	h, found, err := queryHealth(ctx, *conn, r.cfg.Slot)
	if err != nil {
		(*conn).Close(context.Background())
		*conn = nil
	}
	return h, found, err
}

func queryHealth(ctx context.Context, conn *pgx.Conn, slot string) (SlotHealth, bool, error) {
	var h SlotHealth
	var status *string
	err := conn.QueryRow(ctx, `SELECT active, wal_status,
			coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint,
			current_setting('max_slot_wal_keep_size') = '-1'
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&h.Active, &status, &h.RetainedBytes, &h.Unlimited)
	if err == pgx.ErrNoRows {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("read slot %s: %w", slot, err)
	}
	h.WALStatus = deref(status)
	return h, true, nil
}
