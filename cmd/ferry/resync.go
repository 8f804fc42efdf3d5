package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/replicator"
)

type resyncCmd struct {
	connFlags
	tableFlags
	NoWait  bool          `name:"no-wait" help:"Return once the request is in PostgreSQL's WAL, without waiting for the copy."`
	Timeout time.Duration `help:"Give up waiting for the copy after this long (the request stays; the copy still happens)." default:"1h"`
	Names   []string      `arg:"" name:"table" help:"Tables to copy afresh (schema.table)."`
}

// Run asks the running ferry run to copy tables afresh: the request goes
// into PostgreSQL's WAL, where the stream meets it in order.
func (c *resyncCmd) Run(ctx context.Context, log *zap.Logger) error {
	if c.CHCluster != "" {
		return errors.New("resync: rebuilding a table on a ClickHouse cluster is not supported yet: " +
			"drop the table and its _local table ON CLUSTER and restart ferry run, which copies it anew")
	}
	cfg := replicator.Config{ConnString: c.PG, Slot: c.Slot, Publication: c.Publication, Logger: log}
	r, err := replicator.RequestResync(ctx, cfg, c.Names)
	if err != nil {
		return err
	}
	return reportResync(ctx, cfg, r, !c.NoWait, c.Timeout)
}

// reportResync says what was asked and, with wait, waits for it.
func reportResync(ctx context.Context, cfg replicator.Config, r replicator.Resync, wait bool, timeout time.Duration) error {
	fmt.Printf("resync of %v requested at WAL %s\n", r.Tables, r.LSN)
	if !r.Active {
		fmt.Printf("no ferry run streams from slot %s now: it copies the tables when it starts and reaches that position\n", cfgSlot(cfg))
		return nil
	}
	if !wait {
		fmt.Println("ferry run copies them when its stream reaches that position (its log says \"resync done\")")
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := time.Now()
	err := replicator.WaitResync(ctx, cfg, r, func(confirmed pglogrepl.LSN) {
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			fmt.Printf("waiting: ferry run has confirmed WAL %s of %s\n", confirmed, r.LSN)
		}
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("resync: not done after %s (--timeout): the request stays in the slot and ferry run still copies %v", timeout, r.Tables)
	}
	if err != nil {
		return err
	}
	fmt.Printf("resync done: %v copied afresh and swapped in\n", r.Tables)
	return nil
}

func cfgSlot(cfg replicator.Config) string {
	if cfg.Slot == "" {
		return "ferry"
	}
	return cfg.Slot
}
