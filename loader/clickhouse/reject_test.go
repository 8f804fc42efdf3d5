package clickhouse

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/loader"
)

// TestRejectedRowNamed: when the server refuses a batch for one row's
// content, the error names that row's key, not just the table.
func TestRejectedRowNamed(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("refuse"))
	if err := s.conn.Exec(ctxT(t), "ALTER TABLE "+s.table(tm.Name)+" ADD COLUMN chk UInt8 MATERIALIZED throwIf(v = 'bad')"); err != nil {
		t.Fatal(err)
	}
	var rows []loader.Row
	for i := 1; i <= 50; i++ {
		v := "ok"
		if i == 31 {
			v = "bad"
		}
		rows = append(rows, loader.Row{Values: conv(t, tm, fmt.Sprint(i), v, "1"), Version: uint64(i)})
	}
	err := s.Write(ctxT(t), &loader.Batch{Table: tm, Rows: rows})
	if err == nil {
		t.Fatal("the server took a row its table refuses")
	}
	for _, want := range []string{"refuse", "id=31", "row 30 of a batch of 50", "throwIf"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true", err)
	}
}

// TestTypeChangedBehindFerry: a column whose type was changed in
// ClickHouse while ferry runs stops the write, naming it, instead of
// taking narrowed values. (Nullable to Nullable: 26.7 refuses to make a
// Nullable column non-nullable without a DEFAULT.)
func TestTypeChangedBehindFerry(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("drift"))
	write(t, s, tm, loader.Row{Values: conv(t, tm, "1", "a", "1"), Version: 1})
	if err := s.conn.Exec(ctxT(t), "ALTER TABLE "+s.table(tm.Name)+" MODIFY COLUMN n Nullable(UInt8)"); err != nil {
		t.Fatal(err)
	}
	err := s.Write(ctxT(t), &loader.Batch{Table: tm, Rows: []loader.Row{{Values: conv(t, tm, "2", "b", "300"), Version: 2}}})
	if err == nil {
		t.Fatal("Write into a column of another type succeeded")
	}
	for _, want := range []string{"drift", `"n" is Nullable(UInt8)`, "Nullable(Int32)", "id=2", "MODIFY COLUMN `n` Nullable(Int32)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true", err)
	}
	wantLive(t, s, tm, conv(t, tm, "1", "a", "1"))
}
