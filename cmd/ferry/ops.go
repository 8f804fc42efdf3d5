package main

import (
	"context"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

// opsFlags are ferry run's operational settings.
type opsFlags struct {
	MetricsAddr    string        `name:"metrics-addr" help:"Serve the status page (/, /status.json), /metrics, /healthz and /readyz on this address; empty disables." default:"127.0.0.1:9187" env:"FERRY_METRICS_ADDR"`
	Heartbeat      time.Duration `help:"Write a ferry.heartbeat message into the WAL this often, so a quiet database's slot advances and lag is measured end to end; 0 disables." default:"10s" env:"FERRY_HEARTBEAT"`
	MaxRetainedWAL sizeFlag      `name:"max-retained-wal" help:"Warn (log and ferry_slot_retained_wal_over_limit) when the slot retains more WAL than this; 0 disables." default:"10GB" env:"FERRY_MAX_RETAINED_WAL"`
}

// progressEvery is how often ferry run records its position for ferry status.
const progressEvery = 2 * time.Second

// runOps runs the replicator next to the metrics server and the progress
// recorder, all stopped together.
func (c *runCmd) runOps(ctx context.Context, rep *replicator.Replicator, obs *observer, log *zap.Logger) error {
	// A Sink of its own: the replicator's is used from its goroutine only.
	psink, err := openSink(ctx, c.connFlags, zap.NewNop(), sinkOptions{})
	if err != nil {
		return err
	}
	defer psink.Close()
	store := clickhouse.NewProgressStore(psink)
	g, gctx := errgroup.WithContext(ctx)
	aux, stopAux := context.WithCancel(gctx)
	defer stopAux()
	g.Go(func() error {
		defer stopAux()
		err := rep.Run(gctx) // nil when stopped by a signal, even in the copy
		if err != nil && gctx.Err() == nil {
			obs.stopped(errorKind(err), err)
		}
		return err
	})
	g.Go(func() error { return recordProgress(aux, store, c.Slot, obs, progressEvery, log) })
	if c.MetricsAddr != "" {
		g.Go(func() error { return serveMetrics(aux, c.MetricsAddr, obs, log, newStatusPage(obs, c)) })
	}
	return g.Wait()
}
