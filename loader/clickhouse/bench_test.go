package clickhouse

import (
	"strconv"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// BenchmarkWrite writes batches of 100k narrow rows (int8 key, int4, text,
// float8) and reports rows/s.
func BenchmarkWrite(b *testing.B) {
	s := testSink(b)
	tm := mapTable(b, s, schema.Table{Schema: "public", Name: "bench", Columns: []schema.Column{
		keyCol("id", oidInt8), col("n", oidInt4), col("name", oidText), col("score", oidFloat8),
	}})
	const n = 100_000
	rows := make([]loader.Row, n)
	for i := range rows {
		id := strconv.Itoa(i)
		rows[i] = loader.Row{Values: conv(b, tm, id, id, "name-"+id, id+".5"), Version: uint64(i)}
	}
	ctx := ctxT(b)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if err := s.Write(ctx, &loader.Batch{Table: tm, Rows: rows}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "rows/s")
}

// BenchmarkWriteUnchanged writes batches of 10k updates whose text column
// is Unchanged, all resolved from ClickHouse, and reports rows/s.
func BenchmarkWriteUnchanged(b *testing.B) {
	s := testSink(b)
	tm := mapTable(b, s, kvTable("bench_toast"))
	const n = 10_000
	rows := make([]loader.Row, n)
	for i := range rows {
		id := strconv.Itoa(i)
		rows[i] = loader.Row{Values: conv(b, tm, id, "value-"+id, "1"), Version: 1}
	}
	ctx := ctxT(b)
	if err := s.Write(ctx, &loader.Batch{Table: tm, Rows: rows}); err != nil {
		b.Fatal(err)
	}
	for i := range rows {
		rows[i].Values = conv(b, tm, strconv.Itoa(i), loader.Unchanged, "2")
		rows[i].Version = 2
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if err := s.Write(ctx, &loader.Batch{Table: tm, Rows: rows}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "rows/s")
}

// BenchmarkWriteTimestamps writes batches of 100k rows of a key and two
// timestamps, all before 2262 (the driver's native INSERT) or the last one
// after (the external table that rawtime.go describes), and reports rows/s.
func BenchmarkWriteTimestamps(b *testing.B) {
	for _, last := range []string{"2262-04-11 23:47:16.854775", "2270-06-01 12:00:00"} {
		b.Run(last[:4], func(b *testing.B) {
			s := testSink(b)
			tm := mapTable(b, s, schema.Table{Schema: "public", Name: "bench_ts_" + last[:4], Columns: []schema.Column{
				keyCol("id", oidInt8), col("a", oidTimestamp), col("b", oidTimestamptz),
			}})
			const n = 100_000
			rows := make([]loader.Row, n)
			for i := range rows {
				ts := "2024-02-29 12:34:56.789012"
				if i == n-1 {
					ts = last
				}
				rows[i] = loader.Row{Values: conv(b, tm, strconv.Itoa(i), "2001-01-01 00:00:00.000001", ts+"+00"), Version: uint64(i)}
			}
			ctx := ctxT(b)
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				if err := s.Write(ctx, &loader.Batch{Table: tm, Rows: rows}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "rows/s")
		})
	}
}
