package replicator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// copyTables copies every table's rows as of the exported snapshot. Each
// ClickHouse table is emptied first, so a copy redone after a crash leaves
// no row of the interrupted one behind. Rows get Version 0: any change
// streamed afterwards wins over them.
func (r *Replicator) copyTables(ctx context.Context, snapshot string, rels []*relation) error {
	conn, err := connect(ctx, r.cfg.ConnString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("initial copy: begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(snapshot)); err != nil {
		return fmt.Errorf("initial copy: import snapshot %s: %w", snapshot, err)
	}
	for _, rel := range rels {
		if err := r.copyTable(ctx, conn, rel); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// copyTable streams one table with COPY ... TO STDOUT in text format, the
// same text forms pgoutput sends, through the same converters.
func (r *Replicator) copyTable(ctx context.Context, conn *pgx.Conn, rel *relation) error {
	start := time.Now()
	if err := r.sink.Truncate(ctx, rel.tm); err != nil {
		return fmt.Errorf("initial copy of %s: empty the ClickHouse table: %w", rel.ref, err)
	}
	batch := loader.NewBatcher(r.sink, r.cfg.Batch.MaxRows, r.cfg.Batch.MaxBytes, 0)
	var rows, total uint64
	var estimate float64
	if err := conn.QueryRow(ctx, `SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = $1::regclass`, rel.ref.quoted()).Scan(&estimate); err == nil {
		total = uint64(estimate)
	}
	name := rel.ref.String()
	r.cfg.Observer.SnapshotProgress(name, 0, total, false)
	reader := &copyReader{row: func(fields [][]byte) error {
		vals, size, err := rel.copyValues(fields)
		if err != nil {
			return err
		}
		rows++
		row := loader.Row{Values: vals, Seq: rows}
		if err := rel.setRowKey(&row); err != nil {
			return err
		}
		batch.Add(rel.tm, row, size)
		if !batch.Full() {
			return nil
		}
		if err := batch.Flush(ctx); err != nil {
			return err
		}
		r.cfg.Observer.SnapshotProgress(name, rows, total, false)
		return nil
	}}
	sql := fmt.Sprintf("COPY %s (%s) TO STDOUT", rel.ref.quoted(), quotedColumns(rel.tm.Source))
	if _, err := conn.PgConn().CopyTo(ctx, reader, sql); err != nil {
		return fmt.Errorf("initial copy of %s: %w", rel.ref, err)
	}
	if err := reader.Close(); err != nil {
		return fmt.Errorf("initial copy of %s: %w", rel.ref, err)
	}
	if err := batch.Flush(ctx); err != nil {
		return fmt.Errorf("initial copy of %s: %w", rel.ref, err)
	}
	r.cfg.Observer.SnapshotProgress(name, rows, total, true)
	took := time.Since(start)
	r.log.Info("copied table", zap.Stringer("table", rel.ref), zap.Uint64("rows", rows), zap.Duration("took", took),
		zap.Float64("rows_per_s", float64(rows)/took.Seconds()))
	return nil
}

// copyValues converts one COPY row.
func (rel *relation) copyValues(fields [][]byte) ([]any, int, error) {
	cols := rel.tm.Columns
	if len(fields) != len(cols) {
		return nil, 0, fmt.Errorf("initial copy of %s: got %d fields, want %d", rel.ref, len(fields), len(cols))
	}
	vals := make([]any, len(cols))
	size := 16 * len(cols)
	for i, f := range fields {
		v, err := cols[i].Convert(f, f == nil)
		if err != nil {
			return nil, 0, fmt.Errorf("initial copy of %s: %w", rel.ref, err)
		}
		vals[i] = v
		size += len(f)
	}
	return vals, size, nil
}

func (r tableRef) quoted() string { return schema.QuotePG(r.Schema) + "." + schema.QuotePG(r.Name) }

func quotedColumns(t schema.Table) string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = schema.QuotePG(c.Name)
	}
	return strings.Join(names, ", ")
}

// quoteLiteral quotes a string for SQL.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
