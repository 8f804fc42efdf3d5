package replicator

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/ferry-cdc/ferry/schema"
)

// binaryCases are PostgreSQL values of each type ferry reads in binary
// form, ordinary ones and the edges: infinities, NaN, the ends of
// ClickHouse's ranges and PostgreSQL's, BC dates, values a column can't
// hold.
var binaryCases = []struct {
	typ  string
	vals []string
}{
	{"int2", []string{"0", "1", "-32768", "32767"}},
	{"int4", []string{"0", "-2147483648", "2147483647", "42"}},
	{"int8", []string{"0", "-9223372036854775808", "9223372036854775807"}},
	{"float4", []string{"0", "'-0'", "1.5", "'NaN'", "'Infinity'", "'-Infinity'", "3.4028235e38", "1e-45", "0.1"}},
	{"float8", []string{"0", "'-0'", "0.1", "'NaN'", "'Infinity'", "'-Infinity'", "1e308", "5e-324", "-123.456"}},
	{"bool", []string{"true", "false"}},
	{"numeric(10,2)", []string{"0", "0.00", "1.5", "-1.5", "99999999.99", "-99999999.99", "0.01", "'NaN'", "12345.6"}},
	{"numeric(18,4)", []string{"99999999999999.9999", "-0.0001", "10000", "1", "123.45"}},
	{"numeric(18,0)", []string{"999999999999999999", "-999999999999999999", "0", "100000000"}},
	{"numeric(4,4)", []string{"0.1234", "-0.9999", "0"}},
	{"numeric(38,10)", []string{"1234567890123456789012345678.0123456789", "-1", "0", "'NaN'", "0.0000000001"}},
	{"numeric(50,5)", []string{"123456789012345678901234567890123456789012345.12345", "0", "-0.00001"}},
	{"numeric(5,-2)", []string{"12300", "-9999900", "0"}},
	{"numeric", []string{"0", "1.000", "-0.0001", "1e-30", "123456789012345678901234567890.123", "'NaN'", "'Infinity'",
		"'-Infinity'", "10000", "0.5", "1e100", "-99990000.00001000"}},
	{"text", []string{"''", `E'a\tb\nc\\d'`, "'é ✓'", "repeat('x', 3000)"}},
	{"varchar(5)", []string{"'ab'", "''"}},
	{"char(5)", []string{"'ab'", "''"}},
	{"name", []string{"'pg_class'"}},
	{"json", []string{`'{"a": [1, 2],  "b":null}'`, "'[]'"}},
	{"jsonb", []string{`'{"b":1, "a":[2, "x"]}'`, "'null'", `'"é"'`}},
	{"bytea", []string{`'\x00ff'`, "''", "'abc'::bytea"}},
	{"uuid", []string{"'00000000-0000-0000-0000-000000000000'", "'0192c6a4-1b2c-7d3e-8f40-5a6b7c8d9e0f'"}},
	{"date", []string{"'2000-01-01'", "'1970-01-01'", "'1899-12-31'", "'1900-01-01'", "'2299-12-31'", "'2300-01-01'",
		"'0044-03-15 BC'", "'infinity'", "'-infinity'", "'5874897-12-31'", "'4713-11-24 BC'", "'1969-12-31'"}},
	{"timestamp", []string{"'2000-01-01 00:00:00'", "'1970-01-01 00:00:00.000001'", "'1969-12-31 23:59:59.999999'",
		"'1900-01-01 00:00:00'", "'1899-12-31 23:59:59.999999'", "'2299-12-31 23:59:59.999999'", "'2300-01-01 00:00:00'",
		"'infinity'", "'-infinity'", "'0044-03-15 12:00:00.5 BC'", "'294276-12-31 23:59:59.999999'", "'4713-01-01 00:00:00 BC'",
		"'2024-02-29 13:14:15.12'"}},
	{"timestamptz", []string{"'2000-01-01 00:00:00+00'", "'2020-06-01 12:00:00+05'", "'1899-12-31 23:59:59.999999+00'",
		"'2299-12-31 23:59:59.999999+00'", "'infinity'", "'-infinity'", "'0001-01-01 00:00:00+00 BC'", "'294276-12-31 23:59:59+00'"}},
	{"time", []string{"'00:00:00'", "'24:00:00'", "'12:34:56.789'", "'23:59:59.999999'"}},
	{"SCHEMA.mood", []string{"'sad'", "'it''s ✓'"}}, // an enum, made in the test's schema
}

// TestCopyBinaryMatchesText copies each value of binaryCases in COPY's
// text and binary formats through the column's builders, for both kinds
// of ClickHouse server and Nullable and NullAsDefault columns, and wants
// the same value, or the same error, from both; and the binary reader to
// give the same rows however the stream is cut between writes.
func TestCopyBinaryMatchesText(t *testing.T) {
	ctx, _, conn := stackConn(t, 2*time.Minute)
	name := binaryCaseSchema(ctx, t, conn, "binary")
	errorsSeen := 0
	for i, c := range binaryCases {
		table := fmt.Sprintf("%s.t%d", name, i)
		var rows []string
		for _, v := range c.vals {
			rows = append(rows, "("+v+")")
		}
		rows = append(rows, "(NULL)")
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id serial PRIMARY KEY, v %s); INSERT INTO %s (v) VALUES %s",
			table, strings.Replace(c.typ, "SCHEMA", name, 1), table, strings.Join(rows, ", "))); err != nil {
			t.Fatalf("%s: %v", c.typ, err)
		}
		var col schema.Column
		col.Name = "v"
		if err := conn.QueryRow(ctx, `SELECT atttypid, atttypmod, typtype = 'e' FROM pg_attribute JOIN pg_type ON pg_type.oid = atttypid
			WHERE attrelid = $1::regclass AND attname = 'v'`, table).Scan(&col.TypeOID, &col.TypeMod, &col.Enum); err != nil {
			t.Fatal(err)
		}
		var text, bin bytes.Buffer
		sel := "COPY (SELECT v FROM " + table + " ORDER BY id) TO STDOUT"
		if _, err := conn.PgConn().CopyTo(ctx, &text, sel); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.PgConn().CopyTo(ctx, &bin, sel+" (FORMAT binary)"); err != nil {
			t.Fatal(err)
		}
		textRows := splitCopy(t, &copyReader{}, text.Bytes(), len(text.Bytes()))
		binRows := splitCopy(t, &copyBinaryReader{}, bin.Bytes(), len(bin.Bytes()))
		if len(textRows) != len(c.vals)+1 || len(binRows) != len(textRows) {
			t.Fatalf("%s: %d text rows and %d binary ones, want %d", c.typ, len(textRows), len(binRows), len(c.vals)+1)
		}
		for _, cut := range []int{1, 3, 7, 64} {
			if got := splitCopy(t, &copyBinaryReader{}, bin.Bytes(), cut); !reflect.DeepEqual(got, binRows) {
				t.Errorf("%s: the binary stream written %d bytes at a time gave other rows", c.typ, cut)
			}
		}
		for _, caps := range []schema.Capabilities{schema.CapabilitiesFor(26, 7), schema.CapabilitiesFor(18, 16)} {
			for _, nullZero := range []bool{false, true} {
				tm, err := schema.Map(schema.Table{Schema: name, Name: "t", NullAsDefault: nullZero, Columns: []schema.Column{
					{Name: "id", TypeOID: 23, TypeMod: -1, NotNull: true, Key: true}, col}}, caps)
				if err != nil {
					t.Fatal(err)
				}
				cm := tm.Columns[1]
				if !cm.Binary() {
					t.Fatalf("%s as %s: no binary reader", c.typ, cm.Type)
				}
				for r := range textRows {
					want, wantErr := builderRead(cm, textRows[r][0], false)
					got, gotErr := builderRead(cm, binRows[r][0], true)
					if wantErr != "" {
						errorsSeen++
					}
					if got != want || gotErr != wantErr {
						t.Errorf("%s as %s, value %s:\n text   %s %s\n binary %s %s", c.typ, cm.Type, rowValue(c.vals, r),
							want, wantErr, got, gotErr)
					}
				}
			}
		}
	}
	if errorsSeen == 0 {
		t.Error("no value was refused: the edge cases are not reached")
	}
}

// binaryCaseSchema makes a schema for binaryCases' tables, with their
// enum, dropped when the test ends, and returns its name.
func binaryCaseSchema(ctx context.Context, t *testing.T, conn *pgx.Conn, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE") })
	if _, err := conn.Exec(ctx, "CREATE TYPE "+name+".mood AS ENUM ('sad', 'it''s ✓')"); err != nil {
		t.Fatal(err)
	}
	return name
}

func rowValue(vals []string, r int) string {
	if r < len(vals) {
		return vals[r]
	}
	return "NULL"
}

// splitCopy feeds stream to reader cut bytes at a time and returns its
// rows, copied.
func splitCopy(t *testing.T, reader interface {
	Write([]byte) (int, error)
	Close() error
}, stream []byte, cut int) [][][]byte {
	t.Helper()
	var rows [][][]byte
	collect := func(fields [][]byte) error {
		row := make([][]byte, len(fields))
		for i, f := range fields {
			if f != nil {
				row[i] = append([]byte{}, f...)
			}
		}
		rows = append(rows, row)
		return nil
	}
	switch r := reader.(type) {
	case *copyReader:
		r.row = collect
	case *copyBinaryReader:
		r.row = collect
	}
	for len(stream) > 0 {
		n := min(cut, len(stream))
		if _, err := reader.Write(stream[:n]); err != nil {
			t.Fatal(err)
		}
		stream = stream[n:]
	}
	if err := reader.Close(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// builderRead adds one field to a new builder of cm, as text or binary,
// and describes the value it holds, or the error.
func builderRead(cm schema.ColumnMap, field []byte, binary bool) (string, string) {
	b := cm.NewBuilder()
	var err error
	if binary {
		err = b.(schema.BinaryBuilder).AppendBinary(field, field == nil)
	} else {
		err = b.Append(field, field == nil)
	}
	if err != nil {
		return "", err.Error()
	}
	return describe(b.Value(0)), ""
}

// describe spells a value with its Go type and every detail an equality
// check would miss: a decimal's exponent, a time's location, NaN.
func describe(v any) string {
	switch v := v.(type) {
	case decimal.Decimal:
		return fmt.Sprintf("decimal %s e%d", v.Coefficient(), v.Exponent())
	case time.Time:
		return "time " + v.Format(time.RFC3339Nano) + " " + v.Location().String()
	case float64:
		return fmt.Sprintf("float64 %x", math.Float64bits(v))
	case float32:
		return fmt.Sprintf("float32 %x", math.Float32bits(v))
	}
	return fmt.Sprintf("%T %#v", v, v)
}
