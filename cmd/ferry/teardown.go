package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

type teardownCmd struct {
	connFlags
	tableFlags
	Yes            bool `help:"Do it. Without --yes ferry teardown only lists what it would do, and exits 1."`
	Force          bool `help:"Terminate a ferry still streaming from the slot, rather than refuse."`
	DropClickHouse bool `name:"drop-clickhouse" help:"Also drop the replicated tables and ferry's state tables in ClickHouse."`
}

// errNotConfirmed is returned by a teardown without --yes.
var errNotConfirmed = errors.New("nothing done: pass --yes to tear down")

func (c *teardownCmd) Run(ctx context.Context, log *zap.Logger) error {
	cfg := replicator.Config{ConnString: c.PG, Slot: c.Slot, Publication: c.Publication, Tables: c.Tables,
		AppendOnly: c.AppendOnly, TextColumns: c.TextColumns, NullAsDefault: c.Nullable == "default-values", NativeJSON: c.JSONType == "json",
		ExcludeColumns: c.ExcludeColumns, RowFilters: c.RowFilter, Logger: zap.NewNop()}
	var chTables []string
	var sink *clickhouse.Sink
	if c.DropClickHouse {
		// The table list must be read before the publications are dropped.
		var err error
		if sink, err = openSink(ctx, c.connFlags, zap.NewNop(), sinkOptions{}); err != nil {
			return err
		}
		defer sink.Close()
		// Tables replicated insert-only are found in the second publication.
		st, err := replicator.Status(ctx, cfg)
		if err != nil {
			return err
		}
		tcfg := cfg
		for _, t := range st.Tables {
			if t.Publication != c.Publication && !slices.Contains(tcfg.AppendOnly, t.Name) {
				tcfg.AppendOnly = append(slices.Clip(tcfg.AppendOnly), t.Name)
			}
		}
		tms, err := replicator.Tables(ctx, tcfg, sink.Capabilities())
		if err != nil {
			return fmt.Errorf("list the replicated tables to drop in ClickHouse: %w", err)
		}
		for _, tm := range tms {
			chTables = append(chTables, tm.Name)
			view, err := sink.CurrentView(ctx, tm.Name)
			if err != nil {
				return err
			}
			if view != "" {
				chTables = append(chTables, view)
			}
		}
		chTables = append(chTables, clickhouse.StateTables()...)
	}
	steps, err := replicator.Teardown(ctx, cfg, replicator.TeardownOptions{DryRun: !c.Yes, Force: c.Force})
	verb := "done:"
	if !c.Yes {
		verb = "would:"
	}
	for _, s := range steps {
		fmt.Printf("%s %s\n", verb, s)
	}
	if err != nil {
		return err
	}
	for _, t := range chTables {
		if c.Yes {
			if err := sink.DropTable(ctx, t); err != nil {
				return err
			}
		}
		fmt.Printf("%s drop ClickHouse table %s.%s\n", verb, sink.Database(), t)
	}
	if len(steps) == 0 && len(chTables) == 0 {
		fmt.Println("nothing to tear down")
	}
	if !c.Yes {
		fmt.Fprintln(os.Stderr, "ferry teardown: nothing done; run again with --yes")
		return errNotConfirmed
	}
	log.Info("torn down", zap.Int("steps", len(steps)+len(chTables)))
	return nil
}
