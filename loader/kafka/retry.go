package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// defaultCatchUpRetry is LoadConfig.RetryFor with CatchUp when none is
// given: a catch-up run is a script's step, which must end (ferry run
// --catch-up has the same).
const defaultCatchUpRetry = 5 * time.Minute

// maxRetryWait caps the backoff between attempts, as the replicator's.
const maxRetryWait = 10 * time.Second

// runRetrying runs the loader again after an error of the connection to
// Kafka or to the destination (a broker restarted, ClickHouse away): each
// attempt starts over from the group's committed offsets, what was only
// in memory is read again, and versions make its second write harmless.
// Errors another attempt would repeat end it, and so does a Kafka this
// loader never reached: a wrong address is likelier than an outage at
// the very start. Failures in a row are retried for RetryFor at most.
func (l *Loader) runRetrying(ctx context.Context) error {
	wait := time.Second
	var failingSince time.Time
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := l.run(ctx)
		if err != nil && ctx.Err() != nil {
			// Stopped between sessions (listing topics, reading end
			// offsets): nothing is committed that is not written.
			l.log.Info("stopped", zap.NamedError("interrupted", err))
			return nil
		}
		if err == nil || !l.transient(err) {
			return err
		}
		if !l.connected {
			return fmt.Errorf("%w (not retried: ferry has not reached Kafka since it started)", err)
		}
		if time.Since(start) > time.Minute {
			wait, attempt = time.Second, 1 // it ran for a while: start the backoff over
			failingSince = time.Time{}
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if limit := l.cfg.RetryFor; limit > 0 && time.Since(failingSince) >= limit {
			return fmt.Errorf("gave up after retrying for %s (attempt %d; --retry-for sets how long): %w",
				time.Since(failingSince).Round(time.Second), attempt, err)
		}
		l.log.Warn("connection lost; starting again from the group's committed offsets",
			zap.String("group", l.cfg.Group), zap.Int("attempt", attempt), zap.Duration("in", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(wait*2, maxRetryWait)
		l.reset()
	}
}

// reset forgets what the failed attempt held in memory, as a restarted
// process would: the next one reads it again from the committed offsets.
func (l *Loader) reset() {
	l.batch = loader.NewBatcher(l.dest, l.cfg.MaxRows, l.cfg.MaxBytes, l.cfg.MaxAge)
	l.pending = nil
	l.schemas = map[string]schema.Table{}
	l.tables = map[string]*loadTable{}
	l.cuts = map[string]*cut{}
	l.carriers = map[string]bool{}
	l.carrierSince = time.Time{}
	l.storedLast = false
	l.closeAdmin()
}

// transient reports whether another attempt may succeed: a lost or
// refused connection to either side, a timeout, a broker error Kafka
// calls temporary, or a destination error its Retryable accepts. Errors
// in the messages themselves are not.
func (l *Loader) transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if l.cfg.Retryable != nil && l.cfg.Retryable(err) {
		return true
	}
	var ke kafkago.Error
	if errors.As(err, &ke) {
		return ke.Temporary() || ke.Timeout()
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
