package replicator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// errSlotActive: the slot is held by another connection. Right after a
// connection loss the server may still hold it for ferry's old walsender,
// so it is retried; a second ferry on the same slot thus waits for the
// first to stop.
var errSlotActive = errors.New("slot in use")

// maxRetryWait caps the backoff between attempts, both of a whole cycle
// (runRetrying) and of a batch's write (stream.flushWithRetry). An attempt
// against a server that is down costs a refused connection; a longer wait
// only delays the recovery: with a 30 s cap, ClickHouse back after a 30 s
// outage waited another 21 s for ferry's next attempt.
const maxRetryWait = 10 * time.Second

// errStreamEnded: the server ended the replication stream, as a walsender
// does when PostgreSQL shuts down.
var errStreamEnded = errors.New("the server ended the replication stream")

// runRetrying runs the replication cycle again after an error of the
// connection to either side (a server restarted, a network cut): each
// cycle resumes from the slot's confirmed position, and what was only in
// memory is replayed, its versions the same. Errors that another attempt
// would repeat (configuration, privileges, rejected data) end it, and so
// does a PostgreSQL that this process never reached: a wrong address is
// far likelier than an outage at the very start. Failures in a row are
// retried for Config.RetryFor at most.
func (r *Replicator) runRetrying(ctx context.Context) error {
	wait := time.Second
	var busySince, failingSince time.Time
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := r.run(ctx)
		if err != nil && ctx.Err() != nil {
			// Stopped while connecting, copying or writing: nothing past
			// the confirmed position was acknowledged, so this is a clean
			// stop, whichever error the interruption took (a cancelled
			// insert can fail with its closed connection's).
			if errors.Is(err, ctx.Err()) {
				r.log.Info("stopped", zap.NamedError("interrupted", err))
			} else {
				r.log.Warn("stopped; what was not confirmed is sent again at the next start", zap.NamedError("interrupted", err))
			}
			return nil
		}
		if errors.Is(err, errStreamText) && !r.textStream {
			r.textStream = true
			r.log.Warn("the stream was in binary format and reached a table that ferry reads in text (it joined the publication or changed); starting again in text format from the last confirmed position",
				zap.Error(err))
			continue
		}
		if err == nil || !r.transient(err) {
			return err
		}
		if !r.connected && !refusedForNow(err) {
			return fmt.Errorf("%w (not retried: ferry has not reached PostgreSQL since it started)", err)
		}
		if err := r.slotBusyTooLong(ctx, err, &busySince); err != nil {
			return err
		}
		if time.Since(start) > time.Minute {
			wait, attempt = time.Second, 1 // it ran for a while: start the backoff over
			failingSince = time.Time{}
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if limit := r.cfg.RetryFor; limit > 0 && time.Since(failingSince) >= limit {
			return fmt.Errorf("gave up after retrying for %s (attempt %d; --retry-for sets how long): %w",
				time.Since(failingSince).Round(time.Second), attempt, err)
		}
		kind := "postgres"
		if r.retryable != nil && r.retryable(err) {
			kind = "clickhouse"
		}
		r.cfg.Observer.Retry(kind, err)
		if !busySince.IsZero() {
			r.log.Warn("the slot is in use by another connection; waiting for it to be freed",
				zap.String("slot", r.cfg.Slot), zap.Duration("giving up in", r.cfg.SlotBusyTimeout-time.Since(busySince)), zap.Error(err))
		} else if !r.connected {
			r.log.Warn("PostgreSQL answers but refuses connections for now; trying again",
				zap.Int("attempt", attempt), zap.Duration("in", wait), zap.Error(err))
		} else if errors.Is(err, errCopyAgain) {
			r.log.Warn("starting again with a new initial copy", zap.Int("attempt", attempt))
		} else if errors.Is(err, errChangedAtStart) {
			r.log.Warn("a table changed while the initial copy started; starting again", zap.Error(err))
		} else {
			r.log.Warn("connection lost; starting again from the last confirmed position",
				zap.Int("attempt", attempt), zap.Duration("in", wait), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(wait*2, maxRetryWait)
	}
}

// refusedForNow reports whether err is PostgreSQL's own answer that it
// takes no connection at the moment: it is starting up or in recovery,
// shutting down, or has no connection slot free. The address and the
// credentials may well be right, so a first start waits for the server
// (bounded by --retry-for) instead of ending as it does when nothing
// answers: ferry and PostgreSQL started together (a compose stack, a
// boot) would otherwise lose the race.
func refusedForNow(err error) bool {
	switch pgCode(err) {
	case "57P01", "57P02", "57P03", "53300":
		return true
	}
	return false
}

// slotBusyTooLong ends the retries once the slot has been held by another
// connection for longer than SlotBusyTimeout: a walsender left over from
// ferry's own lost connection goes away by then, so the holder is another
// consumer (a second ferry, pg_recvlogical).
func (r *Replicator) slotBusyTooLong(ctx context.Context, err error, since *time.Time) error {
	if !errors.Is(err, errSlotActive) && pgCode(err) != "55006" {
		*since = time.Time{}
		return nil
	}
	if since.IsZero() {
		*since = time.Now()
	}
	if time.Since(*since) < r.cfg.SlotBusyTimeout {
		return nil
	}
	return fmt.Errorf("slot %s has been in use by another connection for %s: %s; stop that consumer, "+
		"or give ferry a slot of its own with --slot: %w", r.cfg.Slot, r.cfg.SlotBusyTimeout.Round(time.Second), slotHolder(ctx, r.cfg), err)
}

// transient reports whether another attempt may succeed.
func (r *Replicator) transient(err error) bool {
	return IsConnectionError(err) || errors.Is(err, errSlotActive) || errors.Is(err, errStreamEnded) ||
		errors.Is(err, errServerSilent) || errors.Is(err, errChangedAtStart) || errors.Is(err, errCopyAgain) ||
		(r.retryable != nil && r.retryable(err))
}

// IsConnectionError reports whether err comes from a lost or refused
// PostgreSQL connection, or from the server shutting down or starting up.
func IsConnectionError(err error) bool {
	if err == nil || IsTLSError(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // admin or crash shutdown, cannot connect now
			pe.Code == "53300", // too many connections
			pe.Code == "55006": // object in use: the old walsender still holds the slot
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF")
}
