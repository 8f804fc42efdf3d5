package replicator

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// HeartbeatPrefix is the prefix of the logical decoding messages ferry
// writes; the content is the time of writing in RFC 3339 with nanoseconds.
const HeartbeatPrefix = "ferry.heartbeat"

// heartbeat writes a non-transactional ferry.heartbeat message every
// interval on a connection of its own, until ctx is done. The message puts
// WAL of this database in front of the slot, so the walsender has
// something to send and ferry something to confirm even when no table
// changes; it also carries its own time, which gives end-to-end latency.
// A failure is logged and retried at the next tick: heartbeats are an aid,
// not a reason to stop replicating.
func (r *Replicator) heartbeat(ctx context.Context, interval time.Duration) error {
	log := r.log.With(zap.String("task", "heartbeat"))
	t := time.NewTicker(interval)
	defer t.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := r.emitHeartbeat(ctx, &conn); err != nil && ctx.Err() == nil {
			r.cfg.Observer.Retry("postgres", err)
			log.Warn("could not write a heartbeat; trying again at the next one", zap.Error(err))
		}
	}
}

// emitHeartbeat writes one heartbeat, opening *conn first when needed and
// closing it after a failure, so the next attempt starts afresh.
func (r *Replicator) emitHeartbeat(ctx context.Context, conn **pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if *conn == nil {
		c, err := connect(ctx, r.cfg.ConnString)
		if err != nil {
			return err
		}
		*conn = c
	}
	_, err := (*conn).Exec(ctx, `SELECT pg_logical_emit_message(false, $1, $2)`, HeartbeatPrefix, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		(*conn).Close(context.Background())
		*conn = nil
	}
	return err
}
