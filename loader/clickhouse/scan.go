package clickhouse

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/ferry-cdc/ferry/schema"
)

// ScanLive streams the live rows of the table (the latest version of every
// key that is not deleted) and calls fn with each row's values, one per
// column of tm, in the Go types schema.ColumnMap.Convert produces (nil for
// NULL). fn must not keep the slice: it is reused for the next row. An
// error from fn stops the scan and is returned as is.
func (s *Sink) ScanLive(ctx context.Context, tm *schema.TableMap, fn func(values []any) error) error {
	cols := make([]int, len(tm.Columns))
	for i := range cols {
		cols[i] = i
	}
	return s.ScanLiveColumns(ctx, tm, cols, fn)
}

// scanSettings bound the memory of a FINAL scan. FINAL merges every
// unmerged part at once, and each part holds a read buffer per column
// read: measured on 18.16 with 11 parts of a 1,000-column table, 2.2 MB
// per column and part with the defaults (1,000 columns would need 24 GB),
// 0.15 MB with these, at no measurable cost in speed. ScanColumns bounds
// the other factor, the columns per scan.
var scanSettings = ch.Settings{"max_read_buffer_size": 64 << 10, "max_block_size": 1024, "max_threads": 1}

// scanBudget is how many (column, unmerged part) pairs one scan may read
// at once: about 300 MB of ClickHouse memory at 0.15 MB each, and twice as
// many open files, well under the usual limits (10 GB a query, 20,000
// files a process).
const scanBudget = 2000

// ScanColumns returns how many columns besides the key one scan of the
// table should read for its memory to stay within scanBudget, given the
// table's active parts now (more parts while a scan runs are within the
// margin of the budget).
func (s *Sink) ScanColumns(ctx context.Context, tm *schema.TableMap) (int, error) {
	name := tm.Name
	if s.cluster != "" {
		name += "_local" // the parts are the replicated local table's
	}
	var parts uint64
	q := "SELECT count() FROM system.parts WHERE active AND database = ? AND table = ?"
	if err := s.conn.QueryRow(ctx, q, s.db, name).Scan(&parts); err != nil {
		return 0, s.red.wrap(err, "clickhouse: count the parts of %s", s.table(tm.Name))
	}
	// Key, version and deleted flag are read by every scan.
	return max(1, scanBudget/int(max(parts, 1))-len(tm.Key)-2), nil
}

// ScanLiveColumns is ScanLive for the columns cols (indexes into
// tm.Columns): fn gets their values in that order.
func (s *Sink) ScanLiveColumns(ctx context.Context, tm *schema.TableMap, cols []int, fn func(values []any) error) error {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = readSelect(tm.Columns[c], schema.QuoteCH(tm.Columns[c].Name))
	}
	q := "SELECT " + strings.Join(names, ", ") + " FROM " + s.table(tm.Name) + " FINAL WHERE " +
		schema.QuoteCH(schema.DeletedColumn) + " = 0"
	ctx = ch.Context(ctx, ch.WithSettings(scanSettings))
	var fnErr error
	err := s.scan(ctx, tm, q, cols, func(vals []any) error {
		fnErr = fn(vals)
		return fnErr
	})
	if err != nil && fnErr != nil {
		return fnErr
	}
	if err != nil {
		return s.red.wrap(err, "clickhouse: scan live rows of %s", s.table(tm.Name))
	}
	return nil
}

// CountLive counts the live rows of the table.
func (s *Sink) CountLive(ctx context.Context, tm *schema.TableMap) (uint64, error) {
	q := "SELECT count() FROM " + s.table(tm.Name) + " FINAL WHERE " + schema.QuoteCH(schema.DeletedColumn) + " = 0"
	var n uint64
	if err := s.conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, s.red.wrap(err, "clickhouse: count live rows of %s", s.table(tm.Name))
	}
	return n, nil
}

// scan runs a query whose result columns are tm.Columns[cols...] and calls
// fn with each row's values, normalised by value.
func (s *Sink) scan(ctx context.Context, tm *schema.TableMap, q string, cols []int, fn func([]any) error) error {
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	if len(types) != len(cols) {
		return fmt.Errorf("query returned %d columns, want %d", len(types), len(cols))
	}
	dest := make([]any, len(types))
	for i, t := range types {
		dest[i] = reflect.New(t.ScanType()).Interface()
	}
	vals := make([]any, len(types))
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		for i, d := range dest {
			if vals[i], err = value(d); err != nil {
				return fmt.Errorf("column %q: %w", tm.Columns[cols[i]].Name, err)
			}
			vals[i] = fromRead(tm.Columns[cols[i]], vals[i])
		}
		if err := fn(vals); err != nil {
			return err
		}
	}
	return rows.Err()
}

// value reads a scanned value the way Convert produces it: a pointer (the
// scan type of a Nullable column) is dereferenced, nil standing for NULL;
// arrays stay []*T, which is what Convert makes of Array(Nullable(T)).
// Values are copied out of dest, which the next Scan overwrites.
func value(dest any) (any, error) {
	switch p := dest.(type) {
	case *string:
		return *p, nil
	case **string:
		return deref(*p), nil
	case *int64:
		return *p, nil
	case **int64:
		return deref(*p), nil
	case *int32:
		return *p, nil
	case **int32:
		return deref(*p), nil
	case *int16:
		return *p, nil
	case **int16:
		return deref(*p), nil
	case *uint8:
		return *p, nil
	case **uint8:
		return deref(*p), nil
	case *float64:
		return *p, nil
	case **float64:
		return deref(*p), nil
	case *decimal.Decimal:
		return *p, nil
	case **decimal.Decimal:
		return deref(*p), nil
	case *uuid.UUID:
		return *p, nil
	case **uuid.UUID:
		return deref(*p), nil
	case *time.Time:
		return p.UTC(), nil
	case **time.Time:
		if *p == nil {
			return nil, nil
		}
		return (*p).UTC(), nil
	}
	return valueOf(reflect.ValueOf(dest).Elem())
}

// valueOf is value for the types it does not list.
func valueOf(v reflect.Value) (any, error) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		return valueOf(v.Elem())
	case reflect.Slice:
		// A fresh slice per row: Scan decodes into a new one every time.
		return v.Interface(), nil
	case reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
		return nil, fmt.Errorf("cannot read ClickHouse values of Go type %s", v.Type())
	}
	if t, ok := v.Interface().(time.Time); ok {
		return t.UTC(), nil
	}
	return v.Interface(), nil
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
