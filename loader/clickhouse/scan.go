package clickhouse

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

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
	names := make([]string, len(tm.Columns))
	for i, c := range tm.Columns {
		names[i] = rawTimeSelect(c, schema.QuoteCH(c.Name))
	}
	q := "SELECT " + strings.Join(names, ", ") + " FROM " + s.table(tm.Name) + " FINAL WHERE " +
		schema.QuoteCH(schema.DeletedColumn) + " = 0"
	cols := make([]int, len(tm.Columns))
	for i := range cols {
		cols[i] = i
	}
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
			if isRawTime(tm.Columns[cols[i]]) {
				vals[i] = fromMicros(vals[i])
			}
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
