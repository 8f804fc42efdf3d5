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
	return r.inSnapshot(ctx, snapshot, func(conn *pgx.Conn) error {
		for _, rel := range rels {
			if err := r.copyTable(ctx, conn, rel, rel.tm, 0, allColumns(rel)); err != nil {
				return err
			}
		}
		return nil
	})
}

// inSnapshot runs fn in a read-only REPEATABLE READ transaction on a
// connection of its own, importing snapshot first unless it is "".
func (r *Replicator) inSnapshot(ctx context.Context, snapshot string, fn func(conn *pgx.Conn) error) error {
	conn, err := connect(ctx, r.cfg.ConnString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("copy: begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	if snapshot != "" {
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(snapshot)); err != nil {
			return fmt.Errorf("copy: import snapshot %s: %w", snapshot, err)
		}
	}
	if err := fn(conn); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// copyFresh copies a table under a snapshot of its own, for a table that
// joins or is rebuilt while the stream runs: any snapshot taken after the
// change that caused it is consistent, since the copy's rows get version
// and every later change has a higher one.
func (r *Replicator) copyFresh(ctx context.Context, rel *relation, target *schema.TableMap, version uint64) error {
	return r.inSnapshot(ctx, "", func(conn *pgx.Conn) error {
		now, err := describeTable(ctx, conn, rel.ref)
		if err != nil {
			return err
		}
		src := project(rel, now)
		rel.stale = src.placeholders > 0
		if rel.stale {
			r.log.Warn("the table changed again since the point the stream is at: columns that no longer match are copied as empty values, "+
				"and the table is rebuilt again when the stream reaches the later change", zap.Stringer("table", rel.ref), zap.Int("columns", src.placeholders))
		}
		return r.copyTable(ctx, conn, rel, target, version, src)
	})
}

// source says which of the stream's columns a copy reads from the
// catalog's current columns, by name.
type source struct {
	table        tableRef // the table as it is named now
	read         []string // current names of the columns read, in order
	from         []int    // per stream column, its index in read; -1 for a placeholder
	placeholders int
}

// allColumns reads every stream column as it is named.
func allColumns(rel *relation) source {
	src := source{table: rel.ref}
	for i, c := range rel.tm.Source.Columns {
		src.read = append(src.read, c.Name)
		src.from = append(src.from, i)
	}
	return src
}

// project matches the stream's columns with the catalog's current ones:
// by attnum where both are known (a rename keeps it), else by name, and
// only when the declared type is the same.
func project(rel *relation, now described) source {
	src := source{table: tableRef{OID: rel.ref.OID, Schema: now.table.Schema, Name: now.table.Name}}
	for i, c := range rel.tm.Source.Columns {
		j := -1
		for k, nc := range now.table.Columns {
			same := nc.Name == c.Name
			if i < len(rel.attnums) && rel.attnums[i] > 0 && now.attnums[k] > 0 {
				same = rel.attnums[i] == now.attnums[k]
			}
			if same && now.typeOIDs[k] == rel.typeOIDs[i] && nc.TypeMod == c.TypeMod {
				j = k
			}
		}
		if j < 0 {
			src.from = append(src.from, -1)
			src.placeholders++
			continue
		}
		src.from = append(src.from, len(src.read))
		src.read = append(src.read, now.table.Columns[j].Name)
	}
	return src
}

// copyTable streams one table with COPY ... TO STDOUT in text format, the
// same text forms pgoutput sends, through the same converters, into the
// ClickHouse table target (rel.tm, or a shadow of it), which it empties
// first. Rows get Version version.
func (r *Replicator) copyTable(ctx context.Context, conn *pgx.Conn, rel *relation, target *schema.TableMap, version uint64, src source) error {
	start := time.Now()
	if err := r.sink.Truncate(ctx, target); err != nil {
		return fmt.Errorf("copy of %s: empty the ClickHouse table: %w", rel.ref, err)
	}
	batch := loader.NewBatcher(r.sink, r.cfg.Batch.MaxRows, r.cfg.Batch.MaxBytes, 0)
	var rows, total uint64
	var estimate float64
	if err := conn.QueryRow(ctx, `SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = $1`, rel.ref.OID).Scan(&estimate); err == nil {
		total = uint64(estimate)
	}
	name := rel.ref.String()
	r.cfg.Observer.SnapshotProgress(name, 0, total, false)
	reader := &copyReader{row: func(fields [][]byte) error {
		vals, size, err := rel.copyValues(fields, src.from)
		if err != nil {
			return err
		}
		rows++
		row := loader.Row{Values: vals, Seq: rows, Version: version}
		if err := rel.setRowKey(&row); err != nil {
			return err
		}
		batch.Add(target, row, size)
		if !batch.Full() {
			return nil
		}
		if err := batch.Flush(ctx); err != nil {
			return err
		}
		r.cfg.Observer.SnapshotProgress(name, rows, total, false)
		return nil
	}}
	sql := copySQL(src.table, src.read)
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

// copyValues converts one COPY row; from maps each column to its field
// (-1: a placeholder, the column's zero value).
func (rel *relation) copyValues(fields [][]byte, from []int) ([]any, int, error) {
	cols := rel.tm.Columns
	vals := make([]any, len(cols))
	size := 16 * len(cols)
	for i := range cols {
		j := from[i]
		if j < 0 {
			vals[i] = cols[i].Zero()
			continue
		}
		if j >= len(fields) {
			return nil, 0, fmt.Errorf("copy of %s: got %d fields, want at least %d", rel.ref, len(fields), j+1)
		}
		f := fields[j]
		v, err := cols[i].Convert(f, f == nil)
		if err != nil {
			return nil, 0, fmt.Errorf("copy of %s: %w", rel.ref, err)
		}
		vals[i] = v
		size += len(f)
	}
	return vals, size, nil
}

// copySQL reads columns of a table; the SELECT form also works for a
// partitioned table, whose rows live in its partitions. With no columns it
// still reads one (empty) field per row.
func copySQL(ref tableRef, cols []string) string {
	list := "''"
	if len(cols) > 0 {
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = schema.QuotePG(c)
		}
		list = strings.Join(quoted, ", ")
	}
	return fmt.Sprintf("COPY (SELECT %s FROM %s) TO STDOUT", list, ref.quoted())
}

func (r tableRef) quoted() string { return schema.QuotePG(r.Schema) + "." + schema.QuotePG(r.Name) }

// quoteLiteral quotes a string for SQL.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
