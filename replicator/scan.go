package replicator

import (
	"context"
	"fmt"

	"github.com/ferry-cdc/ferry/schema"
)

// ScanTable reads every row of tm's PostgreSQL table with COPY and calls fn
// with the values converted exactly as replication converts them. fn must
// not keep the slice.
func ScanTable(ctx context.Context, connString string, tm *schema.TableMap, fn func(values []any) error) error {
	conn, err := connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	ref := tableRef{Schema: tm.Source.Schema, Name: tm.Source.Name}
	rel := &relation{ref: ref, tm: tm}
	src := allColumns(rel)
	vals := make([]any, len(tm.Columns))
	reader := &copyReader{row: func(fields [][]byte) error {
		if _, err := rel.copyValues(vals, fields, src.from); err != nil {
			return err
		}
		return fn(vals)
	}}
	sql := copySQL(src.table, src.read, pageRange{}, src.where, false)
	if _, err := conn.PgConn().CopyTo(ctx, reader, sql); err != nil {
		return fmt.Errorf("read %s: %w", ref, err)
	}
	return reader.Close()
}
