package clickhouse

import (
	"testing"

	"github.com/ferry-cdc/ferry/schema"
)

// TestInsertStreamWholeColumns sends the copy's rows of a column of every
// scalar type ferry maps, NOT NULL and Nullable (with NULLs), in two blocks
// through InsertStream, and
// checks that each column goes to the driver whole (its server type is the
// mapping's) and that ClickHouse holds what Convert makes of the text,
// key and version included. A column the driver took whole but stored
// differently from its value-by-value path would fail here.
func TestInsertStreamWholeColumns(t *testing.T) {
	for _, nullable := range []bool{false, true} {
		name := "whole"
		if nullable {
			name = "whole_null"
		}
		t.Run(name, func(t *testing.T) { insertWholeColumns(t, name, nullable) })
	}
}

func insertWholeColumns(t *testing.T, name string, nullable bool) {
	s := testSink(t)
	numeric := func(p, sc int32) int32 { return p<<16 | sc + 4 }
	nn := func(name string, oid uint32, typmod int32) schema.Column {
		c := col(name, oid)
		c.TypeMod, c.NotNull = typmod, !nullable
		return c
	}
	tm := mapTable(t, s, schema.Table{Schema: "public", Name: name, Columns: []schema.Column{
		keyCol("id", oidInt8),
		nn("i2", oidInt2, -1), nn("i4", oidInt4, -1), nn("o", 26, -1),
		nn("f4", oidFloat4, -1), nn("f8", oidFloat8, -1),
		nn("d64", oidNumeric, numeric(10, 2)), nn("d128", oidNumeric, numeric(30, 5)),
		nn("t", oidText, -1), nn("vc", 1043, -1), nn("by", oidBytea, -1),
		nn("b", oidBool, -1), nn("u", 2950, -1),
		nn("d", oidDate, -1), nn("ts", oidTimestamp, -1), nn("tstz", oidTimestamptz, -1), nn("tm", oidTime, -1),
		nn("lsn", 3220, -1),
	}})
	text := [][]any{
		{"1", "-32768", "-2147483648", "0", "-1.5", "1e-300", "-12345678.99", "-123456789012345678901234.56789",
			"", "é\tx", `\x00ff`, "t", "00000000-0000-0000-0000-000000000001",
			"1900-01-01", "1900-01-01 00:00:00", "2299-12-31 23:59:59.999999+00", "00:00:00", "0/0"},
		{"2", "32767", "2147483647", "4294967295", "NaN", "-Infinity", "99999999.99", "0.00001",
			"a\nb", "varchar", `\x`, "f", "ffffffff-ffff-ffff-ffff-ffffffffffff",
			"2262-04-12", "2262-04-11 23:47:16.854775", "1970-01-01 00:00:00.000001+01:30", "24:00:00", "FFFFFFFF/FFFFFFFF"},
		{"3", "7", "8", "9", "3.4028235e+38", "2.2250738585072014e-308", "0.01", "1",
			"x", "y", `\x7f`, "t", "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
			"2026-12-07", "2026-12-07 02:44:00.5", "2026-12-07 02:44:00.123456-08", "12:34:56.789", "16/B374D848"},
	}
	if nullable {
		for i := 1; i < len(text); i++ {
			for j := 1 + i%2; j < len(text[i]); j += 2 {
				text[i][j] = nil
			}
		}
	}
	send, end, err := s.InsertStream(ctxT(t), tm)
	if err != nil {
		t.Fatal(err)
	}
	prepared, err := s.prepareInsert(ctxT(t), tm)
	if err != nil {
		t.Fatal(err)
	}
	server := prepared.Columns()
	_ = prepared.Abort()
	var want [][]any
	for _, block := range [][][]any{text[:2], text[2:]} {
		cols, rows := blockOf(t, tm, 7, block)
		want = append(want, rows...)
		for j, b := range cols.Cols {
			if _, whole := wholeColumn(server[j], tm.Columns[j], b); !whole {
				t.Errorf("column %s (%s): the server's type is %s: not sent whole", tm.Columns[j].Name, tm.Columns[j].Type, server[j].Type())
			}
		}
		if err := send(cols); err != nil {
			t.Fatal(err)
		}
	}
	if err := end(true); err != nil {
		t.Fatal(err)
	}
	wantLive(t, s, tm, want...)
	rows, err := s.conn.Query(ctxT(t), "SELECT "+schema.QuoteCH(schema.VersionColumn)+" FROM "+s.table(tm.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for ; rows.Next(); n++ {
		var v uint64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != 7 {
			t.Fatalf("a row has version %d, want 7", v)
		}
	}
	if err := rows.Err(); err != nil || n != len(want) {
		t.Fatalf("read %d versions (%v), want %d", n, err, len(want))
	}
}
