package clickhouse

import (
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/shopspring/decimal"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// wireTable has Decimal32, Decimal64 and (past the shortcut) Decimal128
// columns and timestamps (DateTime64(6) on a server that has it, else
// Int64), NOT NULL and Nullable.
func wireTable(t *testing.T, s *Sink, name string) *schema.TableMap {
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
		{Name: "tstz", TypeOID: oidTimestamptz, TypeMod: -1, NotNull: true}, col("ts", oidTimestamp),
	}})
}

// wireRows are rows of wireTable in PostgreSQL's text form: the extremes
// of each width, zeros, signs, NULLs, and text with more fractional digits
// than the scale (trailing zeros) or none at all, which the stream's
// values carry with another exponent than the column's scale; times from
// 1900 to the last microsecond the driver carries.
var wireRows = [][]any{
	{"1", "9999999.99", "0.999999999", "99999999999999.9999", "999999999999999999", "9", "1234567890123456789012345.12345",
		"2262-04-11 23:47:16.854775+00", "1900-01-01 00:00:00"},
	{"2", "-9999999.99", "-0.999999999", "-99999999999999.9999", "-999999999999999999", "-9", "-1234567890123456789012345.12345",
		"1900-01-01 00:00:00+00", "2262-04-11 23:47:16.854775"},
	{"3", "0.00", nil, "-0.0000", nil, "0", nil, "1970-01-01 00:00:00+00", nil},
	{"4", "1.2300", "0.1000000000000", "5", "42.000", "+3", "0.00001", "1969-12-31 23:59:59.999999+00", "1969-12-31 23:59:59.999999"},
	{"5", "-0.01", "0.000000001", ".5", "-0", "1.", "7", "2026-12-07 10:51:45.123456-08:30", "2026-12-07 10:51:45.5"},
}

// TestWireStream writes rows as the stream does (Write, values from
// Convert) and checks that ClickHouse holds them exactly, whether a column
// went by ferry's native encoding or by the driver's path (a decimal with
// more fractional digits than the scale sends its column the driver's
// way).
func TestWireStream(t *testing.T) {
	s := testSink(t)
	tm := wireTable(t, s, "wire_stream")
	var rows []loader.Row
	var want [][]any
	for i, cells := range wireRows {
		vals := conv(t, tm, cells...)
		rows = append(rows, loader.Row{Values: vals, Version: uint64(i + 1)})
		want = append(want, vals)
	}
	write(t, s, tm, rows...)
	// A batch whose every value takes the shortcut, on its own.
	vals := conv(t, tm, "6", "1.25", "-0.5", "3.1416", "12", "1", "2.5", "2000-02-29 12:00:00.000001+00", "2000-02-29 12:00:00")
	write(t, s, tm, loader.Row{Values: vals, Version: 9})
	want = append(want, vals)
	wantLive(t, s, tm, want...)
}

// TestWireCopy sends the same rows as the initial copy does (InsertStream,
// builders that keep the integers) and checks them.
func TestWireCopy(t *testing.T) {
	s := testSink(t)
	tm := wireTable(t, s, "wire_copy")
	send, end, err := s.InsertStream(ctxT(t), tm)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]any
	for _, block := range [][][]any{wireRows[:2], wireRows[2:]} {
		cols, rows := blockOf(t, tm, 3, block)
		want = append(want, rows...)
		if err := send(cols); err != nil {
			t.Fatal(err)
		}
	}
	if err := end(true); err != nil {
		t.Fatal(err)
	}
	wantLive(t, s, tm, want...)
}

// TestWireMatchesDriver appends the same values to two columns of each
// type whose values travel as integers, one by the driver's AppendRow and
// one by ferry's native encoding, and compares the rows they hold; the
// encoding must not touch a column that holds rows. It needs no server:
// the columns are the driver's own.
func TestWireMatchesDriver(t *testing.T) {
	var decimals []any
	for _, v := range []string{"0", "1", "-1", "0.01", "-0.01", "1.5", "12345.678", "-99999.999999", "0.000000001", "1e3", "-2.5e-3"} {
		decimals = append(decimals, decimal.RequireFromString(v))
	}
	var times []any
	for _, v := range []string{"1970-01-01T00:00:00Z", "1900-01-01T00:00:00Z", "2262-04-11T23:47:16.854775Z",
		"1969-12-31T23:59:59.999999Z", "1899-12-31T23:59:59.000001Z", "2026-12-07T10:51:45.123456-08:30", "2026-12-07T10:51:45.123456789Z"} {
		ts, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, ts)
	}
	times = append(times, time.Time{})
	for _, tc := range []struct {
		typ    string
		values []any
	}{
		{"Decimal(9, 2)", decimals}, {"Decimal(9, 9)", decimals}, {"Decimal(18, 0)", decimals}, {"Decimal(18, 6)", decimals},
		{"Nullable(Decimal(12, 3))", decimals}, {"Decimal(1, 0)", decimals},
		{"DateTime64(6, 'UTC')", times}, {"Nullable(DateTime64(6, 'UTC'))", times},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			newCol := func() column.Interface {
				c, err := column.Type(tc.typ).Column("c", &column.ServerContext{Timezone: time.UTC})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			viaDriver, viaWire := newCol(), newCol()
			w, ok := wireColumn(viaWire)
			if !ok {
				t.Fatalf("%s: no native encoding", tc.typ)
			}
			var vals []any
			for _, v := range tc.values {
				one := []loader.Row{{Values: []any{v}}}
				if _, fits := w.encode(nil, 1, w.rowValues(one, 0)); !fits {
					continue // the driver's path keeps these
				}
				vals = append(vals, v)
			}
			if len(vals) < 3 {
				t.Fatalf("only %d of %d values take the native encoding", len(vals), len(tc.values))
			}
			if w.nullable {
				vals = append(vals, nil)
			}
			for _, v := range vals {
				if err := viaDriver.AppendRow(v); err != nil {
					t.Fatalf("driver: %v: %v", v, err)
				}
			}
			rows := make([]loader.Row, len(vals))
			for i, v := range vals {
				rows[i] = loader.Row{Values: []any{v}}
			}
			values := func(w wireForm) wireAt { return w.rowValues(rows, 0) }
			var buf []byte
			done, err := appendWire(viaWire, len(rows), values, &buf)
			if err != nil || !done {
				t.Fatalf("native encoding: done %v, %v", done, err)
			}
			// A column that holds rows already is left to the driver: the
			// columns' Decode fills them from the start.
			if done, err := appendWire(viaWire, len(rows), values, &buf); done || err != nil || viaWire.Rows() != len(rows) {
				t.Fatalf("native encoding into a column of %d rows: done %v, %v", viaWire.Rows(), done, err)
			}
			// Twice, the second time from a column emptied as a flush
			// empties it and with a decoder back from the pool.
			for round := range 2 {
				if round == 1 {
					viaWire.Reset()
					if done, err := appendWire(viaWire, len(rows), values, &buf); err != nil || !done {
						t.Fatalf("native encoding after Reset: done %v, %v", done, err)
					}
				}
				if viaWire.Rows() != viaDriver.Rows() {
					t.Fatalf("%d rows by the native encoding, %d by the driver", viaWire.Rows(), viaDriver.Rows())
				}
				for i := range viaDriver.Rows() {
					a, b := fmt.Sprint(viaDriver.Row(i, false)), fmt.Sprint(viaWire.Row(i, false))
					if a != b {
						t.Errorf("round %d, row %d: driver %s, native %s", round, i, a, b)
					}
				}
			}
		})
	}
}

// TestWireFallsBack lists the values the shortcut leaves to the driver.
func TestWireFallsBack(t *testing.T) {
	w := wireForm{kind: wireDecimal, width: 8, scale: 2}
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
	w4 := wireForm{kind: wireDecimal, width: 4}
	if _, ok := w4.encode(nil, 1, func(int) (int64, bool, bool) { return 1 << 31, false, true }); ok {
		t.Error("encode took 2^31 for a Decimal32")
	}
	for _, ts := range []time.Time{{}, time.Unix(0, 1)} {
		if _, ok := micros(ts); ok {
			t.Errorf("micros took %v", ts)
		}
	}
}
