package clickhouse

import (
	"testing"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

const oidTimestampArray = 1115

// TestWritePast2262 writes rows whose timestamps lie past 2262 (where
// clickhouse-go's nanoseconds end) into a keyed, an append-only and a
// full-row table, through Write and through InsertStream, and reads them
// back with ScanLive and with the server's own toString.
func TestWritePast2262(t *testing.T) {
	s := testSink(t)
	ats := col("ats", oidTimestampArray)
	ats.ElemOID, ats.NotNull = oidTimestamp, true
	cols := []schema.Column{col("ts", oidTimestamp), col("tstz", oidTimestamptz), ats, col("t", oidText)}
	cells := [][]any{
		{"2299-12-31 23:59:59.999999", "2270-06-01 12:00:00+00", `{"2262-04-11 23:47:16.854776",NULL}`, "a"},
		{nil, "2262-04-11 23:47:16.854775+00", "{}", nil},
		{"2299-06-01 00:00:00", nil, "{}", "b"}, // past 2262 in a Nullable column alone
	}
	want := [][]string{
		{"2299-12-31 23:59:59.999999", "2270-06-01 12:00:00.000000", "['2262-04-11 23:47:16.854776',NULL]", "a"},
		{`\N`, "2262-04-11 23:47:16.854775", "[]", `\N`},
		{"2299-06-01 00:00:00.000000", `\N`, "[]", "b"},
	}
	if !s.Capabilities().DateTime64 { // 18.16: Int64 microseconds, always native
		want[0] = []string{"10413791999999999", "9480196800000000", "[9223372036854776,NULL]", "a"}
		want[1][1] = "9223372036854775"
		want[2][0] = "10395302400000000"
	}
	for _, tbl := range []schema.Table{
		{Schema: "public", Name: "keyed", Columns: append([]schema.Column{keyCol("id", oidInt8)}, cols...)},
		{Schema: "public", Name: "appended", AppendOnly: true, Columns: append([]schema.Column{col("id", oidInt8)}, cols...)},
		{Schema: "public", Name: "fullrow", FullRow: true, Columns: append([]schema.Column{col("id", oidInt8)}, cols...)},
	} {
		t.Run(tbl.Name, func(t *testing.T) {
			tm := mapTable(t, s, tbl)
			var rows []loader.Row
			var texts [][]any
			for i, c := range cells {
				for _, id := range []string{"1", "2"} { // 1 by Write, 2 by InsertStream
					text := append([]any{id + string(rune('0'+i))}, c...)
					r := loader.Row{Values: conv(t, tm, text...), Version: 5, Seq: uint64(len(rows) + 1)}
					r.RowKey = "k" + id + string(rune('0'+i))
					rows = append(rows, r)
					texts = append(texts, text)
				}
			}
			var written []loader.Row
			for i := 0; i < len(rows); i += 2 {
				written = append(written, rows[i])
			}
			write(t, s, tm, written...)
			send, end, err := s.InsertStream(ctxT(t), tm)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(rows); i += 2 {
				if err := send(columnsOf(t, tm, rows[i], texts[i])); err != nil {
					t.Fatal(err)
				}
			}
			if err := end(true); err != nil {
				t.Fatal(err)
			}
			vals := make([][]any, len(rows))
			for i := range rows {
				vals[i] = rows[i].Values
			}
			wantLive(t, s, tm, vals...)
			got, err := s.conn.Query(ctxT(t), "SELECT toString(id), ifNull(toString(ts), '\\\\N'), ifNull(toString(tstz), '\\\\N'), toString(ats), ifNull(t, '\\\\N') FROM "+
				s.table(tm.Name)+" ORDER BY id")
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			n := 0
			for ; got.Next(); n++ {
				var id, ts, tstz, ats, text string
				if err := got.Scan(&id, &ts, &tstz, &ats, &text); err != nil {
					t.Fatal(err)
				}
				w := want[n%len(want)] // ids 10, 11, 12, 20, 21, 22
				if ts != w[0] || tstz != w[1] || ats != w[2] || text != w[3] {
					t.Errorf("row %s: %q %q %q %q, want %q", id, ts, tstz, ats, text, w)
				}
			}
			if n != len(rows) {
				t.Errorf("%d rows stored, want %d", n, len(rows))
			}
		})
	}
}
