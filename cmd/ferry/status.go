package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

type statusCmd struct {
	connFlags
	tableFlags
	JSON bool `name:"json" help:"Print the status as JSON."`
}

// status is what ferry status reports.
type status struct {
	replicator.SlotStatus
	// LagSeconds is now minus the time before which every committed
	// transaction is in ClickHouse, as the running ferry last recorded it;
	// null when no ferry recorded any.
	LagSeconds *float64 `json:"lag_seconds"`
	// ProgressUpdated is when the running ferry last recorded its progress.
	ProgressUpdated *time.Time    `json:"progress_updated,omitempty"`
	Snapshot        snapshotState `json:"snapshot"`
	CHRows          []tableRows   `json:"clickhouse_rows"`
	LastError       string        `json:"last_error,omitempty"`
	LastErrorTime   *time.Time    `json:"last_error_time,omitempty"`
}

type snapshotState struct {
	LSN  string `json:"lsn,omitempty"`
	Done bool   `json:"done"`
}

type tableRows struct {
	Table      string `json:"table"`
	CHTable    string `json:"clickhouse_table"`
	Rows       uint64 `json:"rows"`
	PGEstimate int64  `json:"pg_rows_estimate"`
}

// Run reads PostgreSQL and ClickHouse only, so it works next to a running
// ferry.
func (c *statusCmd) Run(ctx context.Context, log *zap.Logger) error {
	st, err := c.read(ctx, log)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(os.Stdout, st)
	return nil
}

func (c *statusCmd) read(ctx context.Context, log *zap.Logger) (status, error) {
	cfg := replicator.Config{ConnString: c.PG, Slot: c.Slot, Publication: c.Publication, Tables: c.Tables,
		AppendOnly: c.AppendOnly, TextColumns: c.TextColumns, NullAsDefault: c.Nullable == "default-values", NativeJSON: c.JSONType == "json",
		ExcludeColumns: c.ExcludeColumns, RowFilters: c.RowFilter, Logger: zap.NewNop()}
	slot, err := replicator.Status(ctx, cfg)
	if err != nil {
		return status{}, err
	}
	if cfg.Slot == "" {
		slot.Slot = "ferry"
	}
	st := status{SlotStatus: slot, CHRows: []tableRows{}}
	sink, err := openSink(ctx, c.connFlags, zap.NewNop(), sinkOptions{})
	if err != nil {
		return st, err
	}
	defer sink.Close()
	snap, err := sink.SnapshotState(ctx, slot.Slot)
	if err != nil {
		return st, err
	}
	st.Snapshot = snapshotState{LSN: snap.LSN, Done: snap.Done}
	pr, found, err := clickhouse.NewProgressStore(sink).Read(ctx, slot.Slot)
	if err != nil {
		return st, err
	}
	if found {
		st.ProgressUpdated = &pr.Updated
		if !pr.CaughtUpTo.IsZero() {
			lag := max(time.Since(pr.CaughtUpTo).Seconds(), 0)
			st.LagSeconds = &lag
		}
		if pr.LastError != "" {
			st.LastError, st.LastErrorTime = pr.LastError, &pr.ErrorTime
		}
	}
	estimates := map[string]int64{}
	for _, t := range slot.Tables {
		estimates[t.Name] = t.Estimate
	}
	tms, err := replicator.Tables(ctx, cfg, sink.Capabilities())
	if err != nil {
		log.Warn("cannot list the replicated tables", zap.Error(err))
		return st, nil
	}
	for _, tm := range tms {
		name := tm.Source.Schema + "." + tm.Source.Name
		n, err := sink.CountLive(ctx, tm)
		if err != nil {
			log.Debug("cannot count rows", zap.String("table", name), zap.Error(err))
		}
		st.CHRows = append(st.CHRows, tableRows{Table: name, CHTable: tm.Name, Rows: n, PGEstimate: estimates[name]})
	}
	return st, nil
}

func printStatus(w io.Writer, st status) {
	switch {
	case !st.Exists:
		fmt.Fprintf(w, "slot %s: does not exist (ferry run creates it)\n", st.Slot)
	default:
		active := "inactive (no ferry streams from it)"
		if st.Active {
			active = fmt.Sprintf("active (backend %d)", st.ActivePID)
		}
		fmt.Fprintf(w, "slot %s: %s, wal_status %s\n", st.Slot, active, st.WALStatus)
		fmt.Fprintf(w, "confirmed LSN:  %s (server at %s)\n", st.ConfirmedLSN, st.CurrentLSN)
		fmt.Fprintf(w, "lag:            %d bytes", st.LagBytes)
		if st.LagSeconds != nil {
			fmt.Fprintf(w, ", %.1f s", *st.LagSeconds)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "retained WAL:   %d bytes", st.RetainedBytes)
		if st.Unlimited {
			fmt.Fprint(w, " (max_slot_wal_keep_size is unlimited)")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "initial copy:   ")
	switch {
	case st.Snapshot.Done:
		fmt.Fprintf(w, "done (at %s)\n", st.Snapshot.LSN)
	case st.Snapshot.LSN != "":
		fmt.Fprintf(w, "in progress (from %s)\n", st.Snapshot.LSN)
	default:
		fmt.Fprintln(w, "not started")
	}
	if st.ProgressUpdated != nil {
		fmt.Fprintf(w, "last progress:  %s\n", st.ProgressUpdated.Format(time.RFC3339))
	}
	if st.LastError != "" {
		fmt.Fprintf(w, "last error:     %s (%s)\n", st.LastError, st.LastErrorTime.Format(time.RFC3339))
	}
	fmt.Fprintln(w, "publication tables:")
	for _, t := range st.Tables {
		fmt.Fprintf(w, "  %-40s %s\n", t.Name, t.Publication)
	}
	fmt.Fprintf(w, "%-40s %14s %14s\n", "table", "clickhouse", "pg estimate")
	for _, t := range st.CHRows {
		fmt.Fprintf(w, "%-40s %14d %14d\n", t.Table, t.Rows, t.PGEstimate)
	}
}
