package clickhouse

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// PostgreSQL type OIDs the tests use.
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidFloat4      = 700
	oidFloat8      = 701
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidNumeric     = 1700
	oidUUID        = 2950
	oidJSONB       = 3802
	oidInt4Array   = 1007
	oidTextArray   = 1009
)

// testSink connects to FERRY_CH_URL with a database of the test's own,
// dropped when the test ends.
func testSink(t testing.TB) *Sink {
	t.Helper()
	dsn := os.Getenv("FERRY_CH_URL")
	if dsn == "" {
		t.Skip("FERRY_CH_URL is not set: set it to a scratch ClickHouse, e.g. clickhouse://default@127.0.0.1:9000/default")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "ferry_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := New(ctx, Config{DSN: dsn, Database: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+schema.QuoteCH(db)); err != nil {
			t.Errorf("drop test database %s: %v", db, err)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func col(name string, oid uint32) schema.Column {
	return schema.Column{Name: name, TypeOID: oid, TypeMod: -1}
}

func keyCol(name string, oid uint32) schema.Column {
	c := col(name, oid)
	c.Key, c.NotNull = true, true
	return c
}

// mapTable maps t for the sink's server and prepares it.
func mapTable(t testing.TB, s *Sink, tbl schema.Table) *schema.TableMap {
	t.Helper()
	tm, err := schema.Map(tbl, s.Capabilities())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctxT(t), []*schema.TableMap{tm}); err != nil {
		t.Fatal(err)
	}
	return tm
}

// conv converts one row given in PostgreSQL text form: a string is a value's
// text, nil is NULL, loader.Unchanged stays as it is.
func conv(t testing.TB, tm *schema.TableMap, cells ...any) []any {
	t.Helper()
	if len(cells) != len(tm.Columns) {
		t.Fatalf("%d cells for %d columns", len(cells), len(tm.Columns))
	}
	out := make([]any, len(cells))
	for i, c := range cells {
		switch c := c.(type) {
		case nil:
			v, err := tm.Columns[i].Convert(nil, true)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = v
		case string:
			v, err := tm.Columns[i].Convert([]byte(c), false)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = v
		default:
			out[i] = c
		}
	}
	return out
}

// deleted is a deleted row of the key values key (the first len(key)
// columns), the others Zero.
func deleted(tm *schema.TableMap, version uint64, key ...any) loader.Row {
	vals := make([]any, len(tm.Columns))
	for i := range vals {
		vals[i] = tm.Columns[i].Zero()
	}
	copy(vals, key)
	return loader.Row{Values: vals, Version: version, Deleted: true}
}

func write(t testing.TB, s *Sink, tm *schema.TableMap, rows ...loader.Row) {
	t.Helper()
	if err := s.Write(ctxT(t), &loader.Batch{Table: tm, Rows: rows}); err != nil {
		t.Fatal(err)
	}
}

// canon is a row in canonical form.
func canon(vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = schema.Canonical(v)
	}
	return strings.Join(parts, " | ")
}

// live reads the table's live rows in canonical form, sorted.
func live(t testing.TB, s *Sink, tm *schema.TableMap) []string {
	t.Helper()
	var out []string
	err := s.ScanLive(ctxT(t), tm, func(vals []any) error {
		out = append(out, canon(vals))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	n, err := s.CountLive(ctxT(t), tm)
	if err != nil {
		t.Fatal(err)
	}
	if n != uint64(len(out)) {
		t.Errorf("CountLive = %d, ScanLive saw %d rows", n, len(out))
	}
	return out
}

// wantLive compares the live rows with rows of values.
func wantLive(t testing.TB, s *Sink, tm *schema.TableMap, rows ...[]any) {
	t.Helper()
	want := make([]string, len(rows))
	for i, r := range rows {
		want[i] = canon(r)
	}
	sort.Strings(want)
	got := live(t, s, tm)
	if len(got) != len(want) {
		t.Fatalf("live rows: got %d, want %d\ngot:  %q\nwant: %q", len(got), len(want), short(got), short(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("live row %d:\ngot:  %s\nwant: %s", i, cut(got[i]), cut(want[i]))
		}
	}
}

func cut(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}

func short(rows []string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = cut(r)
	}
	return out
}

// columnsOf converts cells (as conv takes them: text, or nil for NULL) into
// Columns of one row, as the initial copy does, with row's Version, Seq
// and RowKey.
func columnsOf(t testing.TB, tm *schema.TableMap, row loader.Row, cells []any) *loader.Columns {
	t.Helper()
	c := &loader.Columns{Version: row.Version, FirstSeq: row.Seq}
	if tm.Source.FullRow {
		c.RowKeys = []string{row.RowKey}
	}
	for i, cm := range tm.Columns {
		b := cm.NewBuilder()
		text, isText := cells[i].(string)
		if !isText && cells[i] != nil {
			t.Fatalf("columnsOf: cell %d is %T, want text or nil", i, cells[i])
		}
		if err := b.Append([]byte(text), !isText); err != nil {
			t.Fatal(err)
		}
		c.Cols = append(c.Cols, b)
	}
	return c
}

// blockOf fills one builder per column of tm with rows of cells (as conv
// takes them: text, or nil for NULL), as the initial copy does, and returns
// them with the rows Convert makes of the cells.
func blockOf(t testing.TB, tm *schema.TableMap, version uint64, rows [][]any) (*loader.Columns, [][]any) {
	t.Helper()
	cols := &loader.Columns{Version: version}
	for _, cm := range tm.Columns {
		cols.Cols = append(cols.Cols, cm.NewBuilder())
	}
	var want [][]any
	for _, row := range rows {
		for j, b := range cols.Cols {
			cell, _ := row[j].(string)
			if err := b.Append([]byte(cell), row[j] == nil); err != nil {
				t.Fatal(err)
			}
		}
		want = append(want, conv(t, tm, row...))
	}
	return cols, want
}
