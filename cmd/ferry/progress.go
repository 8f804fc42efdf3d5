package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/schollz/progressbar/v3"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

// copyProgress shows the initial copy: a bar per table on a terminal, a
// log line every logEvery otherwise.
type copyProgress struct {
	log      *zap.Logger
	out      io.Writer // nil: log lines
	logEvery time.Duration

	mu      sync.Mutex
	table   string
	bar     *progressbar.ProgressBar
	start   time.Time
	lastLog time.Time
}

func newCopyProgress(log *zap.Logger) *copyProgress {
	p := &copyProgress{log: log.With(zap.String("component", "copy")), logEvery: 10 * time.Second}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		p.out = os.Stderr
	}
	return p
}

func (p *copyProgress) update(table string, rows, total uint64, done bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if table != p.table {
		p.finishBar()
		p.table, p.start, p.lastLog = table, now, now
		if p.out != nil {
			p.bar = newBar(p.out, table, total)
		}
	}
	if total > 0 && rows > total {
		total = 0 // the estimate was low: no ETA rather than a wrong one
		if p.bar != nil {
			p.bar.ChangeMax64(-1)
		}
	}
	if p.bar != nil {
		_ = p.bar.Set64(int64(rows))
		if done {
			p.finishBar()
		}
		return
	}
	if done || rows == 0 || now.Sub(p.lastLog) < p.logEvery {
		return // the replicator logs each finished table itself
	}
	p.lastLog = now
	rate := float64(rows) / now.Sub(p.start).Seconds()
	fields := []zap.Field{zap.String("table", table), zap.Uint64("rows", rows), zap.Float64("rows_per_s", float64(int64(rate)))}
	if total > 0 && rate > 0 {
		fields = append(fields, zap.Uint64("estimated_rows", total),
			zap.Duration("eta", time.Duration(float64(total-rows)/rate*float64(time.Second)).Round(time.Second)))
	}
	p.log.Info("copying", fields...)
}

func (p *copyProgress) finishBar() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.out)
		p.bar = nil
	}
}

func newBar(w io.Writer, table string, total uint64) *progressbar.ProgressBar {
	max := int64(total)
	if max == 0 {
		max = -1 // unknown: a spinner with the count
	}
	return progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(table),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("rows"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetWidth(30),
	)
}

// recordProgress writes the observer's position and last error to
// ClickHouse every interval, for `ferry status`, and once more when ctx is
// done, so the final position and error are kept.
func recordProgress(ctx context.Context, store *clickhouse.ProgressStore, slot string, o *observer, interval time.Duration, log *zap.Logger) error {
	var last clickhouse.Progress
	write := func(ctx context.Context) {
		pr := o.progress()
		if pr == last {
			return
		}
		if err := store.Record(ctx, slot, pr); err != nil {
			log.Warn("could not record progress for ferry status", zap.Error(err))
			return
		}
		last = pr
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			write(fctx)
			cancel()
			return nil
		case <-t.C:
			write(ctx)
		}
	}
}

func (o *observer) progress() clickhouse.Progress {
	o.mu.Lock()
	defer o.mu.Unlock()
	pr := clickhouse.Progress{LastError: o.lastErr, ErrorTime: o.errTime, CaughtUpTo: o.caughtUpTo}
	if o.confirmed != 0 {
		pr.ConfirmedLSN = o.confirmed.String()
	}
	return pr
}

// errorKind sorts an error that stopped replication, for ferry_errors_total.
func errorKind(err error) string {
	var pe *pgconn.PgError
	msg := err.Error()
	switch {
	case errors.Is(err, replicator.ErrSlotLost):
		return "slot_lost"
	case strings.Contains(msg, "clickhouse") || strings.Contains(msg, "destination"):
		return "clickhouse"
	case errors.As(err, &pe) || strings.Contains(msg, "PostgreSQL") || strings.Contains(msg, "slot"):
		return "postgres"
	}
	return "other"
}
