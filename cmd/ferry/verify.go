package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
	"github.com/ferry-cdc/ferry/verify"
)

type verifyCmd struct {
	connFlags
	tableFlags
	Repair        bool          `help:"Copy the tables whose rows differ afresh (ferry resync), wait for the copy, and verify them again."`
	RepairTimeout time.Duration `name:"repair-timeout" help:"With --repair: give up waiting for the copies after this long." default:"1h"`
}

// Run compares every replicated table and fails naming the tables that
// differ and their first differing keys. With --repair it resyncs the
// tables whose rows differ and compares them again.
func (c *verifyCmd) Run(ctx context.Context, log *zap.Logger) error {
	sink, err := openSink(ctx, c.connFlags, log, sinkOptions{})
	if err != nil {
		return err
	}
	defer sink.Close()
	if err := replicator.CheckJSONType(c.JSONType == "json", sink.Capabilities(), "ClickHouse "+sink.ServerVersion()); err != nil {
		return err
	}
	cfg := replicator.Config{
		ConnString: c.PG, Slot: c.Slot, Publication: c.Publication, Tables: c.Tables,
		AppendOnly: c.AppendOnly, TextColumns: c.TextColumns, NullAsDefault: c.Nullable == "default-values", NativeJSON: c.JSONType == "json",
		ExcludeColumns: c.ExcludeColumns, RowFilters: c.RowFilter, Logger: log,
	}
	tms, err := replicator.Tables(ctx, cfg, sink.Capabilities())
	if err != nil {
		return err
	}
	bad, rows, err := c.compare(ctx, sink, tms)
	if err != nil {
		return err
	}
	if len(rows) > 0 && c.Repair {
		if c.CHCluster != "" {
			return fmt.Errorf("verify --repair: rebuilding a table on a ClickHouse cluster is not supported yet; %d tables differ: %v", len(bad), bad)
		}
		r, err := replicator.RequestResync(ctx, cfg, rows)
		if err != nil {
			return err
		}
		if !r.Active {
			fmt.Printf("repair: resync of %v requested at WAL %s; no ferry run streams from slot %s now, so the copy happens when it starts\n",
				r.Tables, r.LSN, cfgSlot(cfg))
			return fmt.Errorf("verify: %d tables differ: %v (resync requested)", len(bad), bad)
		}
		fmt.Printf("repair: copying %v afresh\n", r.Tables)
		if err := reportResync(ctx, cfg, r, true, c.RepairTimeout); err != nil {
			return err
		}
		var again []*schema.TableMap
		for _, tm := range tms {
			if slices.Contains(rows, tm.Source.Schema+"."+tm.Source.Name) {
				again = append(again, tm)
			}
		}
		fmt.Println("repair: verifying the copied tables again")
		still, _, err := c.compare(ctx, sink, again)
		if err != nil {
			return err
		}
		repaired := len(rows) - len(still)
		bad = slices.DeleteFunc(bad, func(t string) bool { return slices.Contains(rows, t) && !slices.Contains(still, t) })
		fmt.Printf("repair: %d of %d tables repaired\n", repaired, len(rows))
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "%d of %d tables differ\n", len(bad), len(tms))
		return fmt.Errorf("verify: %d tables differ: %v", len(bad), bad)
	}
	fmt.Printf("all %d tables match\n", len(tms))
	return nil
}

// compare verifies tables and prints what it finds. It returns the tables
// that differ and, of those, the ones whose rows differ (a resync's
// business, unlike a schema change not applied yet).
func (c *verifyCmd) compare(ctx context.Context, sink *clickhouse.Sink, tms []*schema.TableMap) (bad, rows []string, err error) {
	source := func(ctx context.Context, tm *schema.TableMap, fn func([]any) error) error {
		return replicator.ScanTable(ctx, c.PG, tm, fn)
	}
	for _, tm := range tms {
		exists, diffs, extra, err := sink.ColumnDifferences(ctx, tm)
		if err != nil {
			return nil, nil, err
		}
		if !exists || len(diffs) > 0 {
			// Not a table verify can compare row by row: say how it differs.
			name := tm.Source.Schema + "." + tm.Source.Name
			bad = append(bad, name)
			if !exists {
				fmt.Printf("DIFFERS  %s: no ClickHouse table %s: ferry run creates and copies it\n", name, tm.Name)
				continue
			}
			fmt.Printf("DIFFERS  %s: the ClickHouse table's columns are not the PostgreSQL table's: %s\n", name, strings.Join(diffs, "; "))
			fmt.Printf("         a schema change ferry has not applied yet: ferry run applies it when the stream reaches it " +
				"(without ferry setup's DDL capture, at the table's next row change); verify again after that\n")
			continue
		}
		if len(extra) > 0 {
			// A dropped column ferry has yet to drop: the others compare.
			fmt.Printf("note     %s.%s: ClickHouse still has %s (a drop ferry applies when the stream reaches it)\n",
				tm.Source.Schema, tm.Source.Name, strings.Join(extra, "; "))
		}
		width, err := sink.ScanColumns(ctx, tm)
		if err != nil {
			return nil, nil, err
		}
		res, err := verify.Table(ctx, tm, source, sink.ScanLiveColumns, verify.Config{DestColumns: width})
		if err != nil {
			return nil, nil, err
		}
		if res.Match {
			fmt.Printf("ok       %s: %d rows\n", res.Table, res.SourceRows)
			continue
		}
		bad = append(bad, res.Table)
		fmt.Printf("DIFFERS  %s: %d rows in PostgreSQL, %d in ClickHouse\n", res.Table, res.SourceRows, res.DestRows)
		if tm.Source.FullRow && len(res.Differences) == 0 && res.SourceRows > res.DestRows {
			// No row differs by its columns: PostgreSQL holds rows equal in
			// every column to another, which a copy would not change.
			fmt.Printf("         PostgreSQL holds rows equal in every column to another row, which ClickHouse keeps once: the table has no key, "+
				"so its rows are identified by all their columns. Give %s a primary key (then resync it) to copy them exactly\n", res.Table)
			continue
		}
		rows = append(rows, res.Table)
		for _, d := range res.Differences {
			fmt.Printf("         %s\n", d)
		}
	}
	return bad, rows, nil
}
