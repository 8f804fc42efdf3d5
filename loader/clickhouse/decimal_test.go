package clickhouse

import (
	"fmt"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/shopspring/decimal"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// decimalTable has Decimal32, Decimal64 and (past the shortcut) Decimal128
// columns, NOT NULL and Nullable.
func decimalTable(t *testing.T, s *Sink, name string) *schema.TableMap {
	numeric := func(name string, p, sc int32, notNull bool) schema.Column {
		c := col(name, oidNumeric)
		c.TypeMod, c.NotNull = p<<16|sc+4, notNull
		return c
	}
	return mapTable(t, s, schema.Table{Schema: "public", Name: name, Columns: []schema.Column{
		keyCol("id", oidInt8),
		numeric("d9", 9, 2, true), numeric("d9n", 9, 9, false),
		numeric("d18", 18, 4, true), numeric("d18n", 18, 0, false), numeric("d1", 1, 0, true),
		numeric("d30", 30, 5, false),
	}})
}

// decimalRows are rows of decimalTable in PostgreSQL's text form: the
// extremes of each width, zeros, signs, NULLs, and text with more
// fractional digits than the scale (trailing zeros) or none at all, which
// the stream's values carry with another exponent than the column's scale.
var decimalRows = [][]any{
	{"1", "9999999.99", "0.999999999", "99999999999999.9999", "999999999999999999", "9", "1234567890123456789012345.12345"},
	{"2", "-9999999.99", "-0.999999999", "-99999999999999.9999", "-999999999999999999", "-9", "-1234567890123456789012345.12345"},
	{"3", "0.00", nil, "-0.0000", nil, "0", nil},
	{"4", "1.2300", "0.1000000000000", "5", "42.000", "+3", "0.00001"},
	{"5", "-0.01", "0.000000001", ".5", "-0", "1.", "7"},
}

// TestDecimalStream writes decimal rows as the stream does (Write, values
// from Convert) and checks that ClickHouse holds them exactly, whether a
// column went by ferry's native encoding or by the driver's path (a value
// with more fractional digits than the scale sends its column the
// driver's way).
func TestDecimalStream(t *testing.T) {
	s := testSink(t)
	tm := decimalTable(t, s, "dec_stream")
	var rows []loader.Row
	var want [][]any
	for i, cells := range decimalRows {
		vals := conv(t, tm, cells...)
		rows = append(rows, loader.Row{Values: vals, Version: uint64(i + 1)})
		want = append(want, vals)
	}
	write(t, s, tm, rows...)
	// A batch whose every value takes the shortcut, on its own.
	vals := conv(t, tm, "6", "1.25", "-0.5", "3.1416", "12", "1", "2.5")
	write(t, s, tm, loader.Row{Values: vals, Version: 9})
	want = append(want, vals)
	wantLive(t, s, tm, want...)
}

// TestDecimalCopy sends the same rows as the initial copy does
// (InsertStream, builders that keep scaled integers) and checks them.
func TestDecimalCopy(t *testing.T) {
	s := testSink(t)
	tm := decimalTable(t, s, "dec_copy")
	send, end, err := s.InsertStream(ctxT(t), tm)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]any
	for _, block := range [][][]any{decimalRows[:2], decimalRows[2:]} {
		cols := &loader.Columns{Version: 3}
		for _, cm := range tm.Columns {
			cols.Cols = append(cols.Cols, cm.NewBuilder())
		}
		for _, row := range block {
			for j, b := range cols.Cols {
				cell, _ := row[j].(string)
				if err := b.Append([]byte(cell), row[j] == nil); err != nil {
					t.Fatal(err)
				}
			}
			want = append(want, conv(t, tm, row...))
		}
		if err := send(cols); err != nil {
			t.Fatal(err)
		}
	}
	if err := end(true); err != nil {
		t.Fatal(err)
	}
	wantLive(t, s, tm, want...)
}

// TestDecimalWireMatchesDriver appends the same values to two columns of
// each Decimal type, one by the driver's AppendRow and one by ferry's
// native encoding, and compares the rows they hold; the encoding must not
// touch a column that holds rows. It needs no server: the columns are the
// driver's own.
func TestDecimalWireMatchesDriver(t *testing.T) {
	values := []string{"0", "1", "-1", "0.01", "-0.01", "1.5", "12345.678", "-99999.999999", "0.000000001", "1e3", "-2.5e-3"}
	for _, typ := range []string{"Decimal(9, 2)", "Decimal(9, 9)", "Decimal(18, 0)", "Decimal(18, 6)", "Nullable(Decimal(12, 3))", "Decimal(1, 0)"} {
		t.Run(typ, func(t *testing.T) {
			newCol := func() column.Interface {
				c, err := column.Type(typ).Column("c", nil)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			viaDriver, viaWire := newCol(), newCol()
			w, ok := wireDecimal(viaWire)
			if !ok {
				t.Fatalf("%s: no native encoding", typ)
			}
			var ds []any
			for _, v := range values {
				d := decimal.RequireFromString(v)
				s, fits := w.scaled(d)
				if !fits || w.width == 4 && (s > maxInt32 || s < minInt32) {
					continue // the driver's path keeps these
				}
				ds = append(ds, d)
			}
			if w.nullable {
				ds = append(ds, nil)
			}
			for _, d := range ds {
				if err := viaDriver.AppendRow(d); err != nil {
					t.Fatalf("driver: %v: %v", d, err)
				}
			}
			rows := make([]loader.Row, len(ds))
			for i, d := range ds {
				rows[i] = loader.Row{Values: []any{d}}
			}
			values := func(w decimalWire) scaledAt { return w.rowValues(rows, 0) }
			var buf []byte
			done, err := appendDecimals(viaWire, len(rows), values, &buf)
			if err != nil || !done {
				t.Fatalf("native encoding: done %v, %v", done, err)
			}
			// A column that holds rows already is left to the driver: the
			// columns' Decode fills them from the start.
			if done, err := appendDecimals(viaWire, len(rows), values, &buf); done || err != nil || viaWire.Rows() != len(rows) {
				t.Fatalf("native encoding into a column of %d rows: done %v, %v", viaWire.Rows(), done, err)
			}
			if viaWire.Rows() != viaDriver.Rows() {
				t.Fatalf("%d rows by the native encoding, %d by the driver", viaWire.Rows(), viaDriver.Rows())
			}
			for i := range viaDriver.Rows() {
				a, b := fmt.Sprint(viaDriver.Row(i, false)), fmt.Sprint(viaWire.Row(i, false))
				if a != b {
					t.Errorf("row %d: driver %s, native %s", i, a, b)
				}
			}
		})
	}
}

// TestDecimalScaledFallsBack lists the values the shortcut leaves to the
// driver.
func TestDecimalScaledFallsBack(t *testing.T) {
	w := decimalWire{width: 8, scale: 2}
	for _, tc := range []struct {
		v    string
		want int64
		ok   bool
	}{
		{"1.23", 123, true},
		{"1.2300", 0, false}, // digits past the scale: the driver decides
		{"-12e3", -1200000, true},
		{"1234567890123456789", 0, false}, // a 19-digit coefficient
		{"9223372036854775.80", 922337203685477580, true},
		{"92233720368547758.07", 0, false}, // a 19-digit coefficient
		{"999999999999999999", 0, false},   // past an int64 once scaled
	} {
		got, ok := w.scaled(decimal.RequireFromString(tc.v))
		if ok != tc.ok || got != tc.want {
			t.Errorf("scaled(%s) = %d, %v; want %d, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
	// A Decimal32 value past 32 bits goes to the driver too.
	w4 := decimalWire{width: 4, scale: 0}
	if _, ok := w4.encode(nil, 1, func(int) (int64, bool, bool) { return 1 << 31, false, true }); ok {
		t.Error("encode took 2^31 for a Decimal32")
	}
}
