package clickhouse

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// wideTable has a column of every kind ferry maps.
func wideTable() schema.Table {
	n102 := col("n102", oidNumeric)
	n102.TypeMod = (10<<16 | 2) + 4
	ai := col("ai", oidInt4Array)
	ai.ElemOID, ai.NotNull = oidInt4, true
	at := col("at", oidTextArray)
	at.ElemOID = oidText
	e := col("e", 90001)
	e.Enum = true
	return schema.Table{Schema: "public", Name: "wide", Columns: []schema.Column{
		keyCol("id", oidInt8), col("i4", oidInt4), col("i2", oidInt2), col("f4", oidFloat4),
		col("f8", oidFloat8), n102, col("n", oidNumeric), col("t", oidText), col("b", oidBool),
		col("d", oidDate), col("ts", oidTimestamp), col("tstz", oidTimestamptz), col("tm", oidTime),
		col("u", oidUUID), col("j", oidJSONB), col("by", oidBytea), ai, at, e,
	}}
}

func wideRow(t testing.TB, tm *schema.TableMap, id string) []any {
	return conv(t, tm, id, "-2147483648", "32767", "1.5", "-2.25e-300", "12345678.91", "-123456789012345678901234567890.123456789",
		"héllo, wörld", "t", "2024-02-29", "2024-02-29 12:34:56.123456", "1999-12-31 23:59:59.999999+00", "23:59:59.999999",
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"a": [1, 2, {"b": null}]}`, `\x00ff10`, "{1,NULL,-3}",
		`{"a b",NULL,"c\"d"}`, "happy")
}

func TestWriteAllTypes(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, wideTable())
	nulls := make([]any, len(tm.Columns))
	nulls[0] = "2"
	nulls[16] = "{}" // the NOT NULL array
	r1, r2 := wideRow(t, tm, "1"), conv(t, tm, nulls...)
	write(t, s, tm, loader.Row{Values: r1, Version: 10}, loader.Row{Values: r2, Version: 10})
	wantLive(t, s, tm, r1, r2)
	// Prepare is idempotent and accepts the table it made.
	if err := s.Prepare(ctxT(t), []*schema.TableMap{tm}); err != nil {
		t.Fatal(err)
	}
}

func kvTable(name string) schema.Table {
	return schema.Table{Schema: "public", Name: name, Columns: []schema.Column{
		keyCol("id", oidInt8), col("v", oidText), col("n", oidInt4),
	}}
}

func TestUpdateDelete(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("kv"))
	a1, b1 := conv(t, tm, "1", "a", "1"), conv(t, tm, "2", "b", "1")
	write(t, s, tm, loader.Row{Values: a1, Version: 0}, loader.Row{Values: b1, Version: 0})
	a2 := conv(t, tm, "1", "a2", "2")
	write(t, s, tm, loader.Row{Values: a2, Version: 100})
	wantLive(t, s, tm, a2, b1)
	// A delete, then a replay of an older version, which must not revive it.
	write(t, s, tm, deleted(tm, 200, b1[0]))
	write(t, s, tm, loader.Row{Values: b1, Version: 0})
	wantLive(t, s, tm, a2)
	// In one batch: update then delete then insert again; the last wins.
	a3, a4 := conv(t, tm, "1", "a3", "3"), conv(t, tm, "1", "a4", "4")
	write(t, s, tm, loader.Row{Values: a3, Version: 300}, deleted(tm, 301, a3[0]), loader.Row{Values: a4, Version: 302})
	wantLive(t, s, tm, a4)
}

func randomText(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestUnchanged(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("toast"))
	big := randomText(100_000)
	r1 := conv(t, tm, "1", big, "1")
	r2 := conv(t, tm, "2", "small", "1")
	write(t, s, tm, loader.Row{Values: r1, Version: 1}, loader.Row{Values: r2, Version: 1})

	// Key 1 resolves from ClickHouse; key 2 from ClickHouse first, then from
	// its earlier row in the batch, which itself set a new value.
	u1 := conv(t, tm, "1", loader.Unchanged, "2")
	u2a := conv(t, tm, "2", "new", "2")
	u2b := conv(t, tm, "2", loader.Unchanged, "3")
	batch := []loader.Row{{Values: u1, Version: 2}, {Values: u2a, Version: 2}, {Values: u2b, Version: 3}}
	write(t, s, tm, batch...)
	if batch[0].Values[1] != loader.Unchanged {
		t.Error("Write modified the caller's row")
	}
	wantLive(t, s, tm, conv(t, tm, "1", big, "2"), conv(t, tm, "2", "new", "3"))

	// A new key, inserted then updated with Unchanged in the same batch.
	big3 := randomText(100_000)
	write(t, s, tm, loader.Row{Values: conv(t, tm, "3", big3, "1"), Version: 4},
		loader.Row{Values: conv(t, tm, "3", loader.Unchanged, "2"), Version: 5})
	wantLive(t, s, tm, conv(t, tm, "1", big, "2"), conv(t, tm, "2", "new", "3"), conv(t, tm, "3", big3, "2"))
}

func TestUnchangedMissing(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("toast"))
	ok := conv(t, tm, "1", "x", "1")
	bad := conv(t, tm, "2", loader.Unchanged, "1")
	err := s.Write(ctxT(t), &loader.Batch{Table: tm, Rows: []loader.Row{{Values: ok, Version: 1}, {Values: bad, Version: 1}}})
	if err == nil {
		t.Fatal("Write of an unresolvable Unchanged value succeeded")
	}
	for _, want := range []string{"toast", `"v"`, "id=2", "REPLICA IDENTITY FULL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true", err)
	}
	wantLive(t, s, tm) // nothing of the batch was written

	// After a delete in the same batch there is no value either.
	err = s.Write(ctxT(t), &loader.Batch{Table: tm, Rows: []loader.Row{
		{Values: ok, Version: 1}, deleted(tm, 2, ok[0]), {Values: conv(t, tm, "1", loader.Unchanged, "2"), Version: 3}}})
	if err == nil {
		t.Fatal("Write of an Unchanged value after a delete succeeded")
	}
	wantLive(t, s, tm)
}

func TestTruncate(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("tr"))
	write(t, s, tm, loader.Row{Values: conv(t, tm, "1", "x", "1"), Version: 1})
	if err := s.Truncate(ctxT(t), tm); err != nil {
		t.Fatal(err)
	}
	wantLive(t, s, tm)
	r := conv(t, tm, "2", "y", "1")
	write(t, s, tm, loader.Row{Values: r, Version: 0})
	wantLive(t, s, tm, r)
}

// TestTruncateLeavesNoParts: once Truncate returns, the server holds no
// part of the table with a row, active or not. ClickHouse 18.16's TRUNCATE
// only marks the parts outdated and leaves them on disk for
// old_parts_lifetime (8 minutes); a server restarted meanwhile loads them
// again, and the truncated rows are back while the WAL past the truncation
// is confirmed (ferry torture seed 883963 round 1 with restarts, on 18.16:
// 183 keys deleted in PostgreSQL visible in ClickHouse). ferry cannot see
// the disk, so the parts the server lists are what the test checks:
// before the fix 18.16 listed the parts it had truncated.
func TestTruncateLeavesNoParts(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("tr_parts"))
	// An insert is a part; from about five, 18.16 merges them, and a merge
	// under way when TRUNCATE runs keeps them from being removed then.
	for i := 1; i <= 10; i++ {
		write(t, s, tm, loader.Row{Values: conv(t, tm, fmt.Sprint(i), "x", "1"), Version: uint64(i)})
	}
	if err := s.Truncate(ctxT(t), tm); err != nil {
		t.Fatal(err)
	}
	wantLive(t, s, tm)
	var parts, rows uint64
	err := s.conn.QueryRow(ctxT(t), "SELECT count(), sum(rows) FROM system.parts WHERE database = ? AND table = ? AND rows > 0",
		s.db, tm.Name).Scan(&parts, &rows)
	if err != nil {
		t.Fatal(err)
	}
	if parts > 0 {
		t.Errorf("after Truncate the server still holds %d parts of the table with %d rows, which a restart makes visible again", parts, rows)
	}
	r := conv(t, tm, "9", "y", "1")
	write(t, s, tm, loader.Row{Values: r, Version: 1})
	wantLive(t, s, tm, r)
}

func TestAppendOnly(t *testing.T) {
	s := testSink(t)
	tbl := schema.Table{Schema: "logs", Name: "events", AppendOnly: true, Columns: []schema.Column{
		col("msg", oidText), col("n", oidInt4),
	}}
	tm := mapTable(t, s, tbl)
	if tm.Name != "logs__events" {
		t.Errorf("table name %q", tm.Name)
	}
	a, b, c := conv(t, tm, "a", "1"), conv(t, tm, "a", "1"), conv(t, tm, "c", nil)
	rows := []loader.Row{{Values: a, Version: 0, Seq: 1}, {Values: b, Version: 0, Seq: 2}, {Values: c, Version: 7, Seq: 0}}
	write(t, s, tm, rows...)
	write(t, s, tm, rows...) // a replay collapses
	wantLive(t, s, tm, a, b, c)
}

func TestPrepareMismatch(t *testing.T) {
	s := testSink(t)
	mapTable(t, s, kvTable("mm"))
	changed := kvTable("mm")
	changed.Columns[2] = col("n", oidInt8)
	changed.Columns = append(changed.Columns, col("extra", oidText))
	tm, err := schema.Map(changed, s.Capabilities())
	if err != nil {
		t.Fatal(err)
	}
	err = s.Prepare(ctxT(t), []*schema.TableMap{tm})
	if err == nil {
		t.Fatal("Prepare accepted a table with other columns")
	}
	for _, want := range []string{"mm", `"n"`, `"extra"`, "drop the ClickHouse table"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestSnapshotState(t *testing.T) {
	s := testSink(t)
	ctx := ctxT(t)
	st, err := s.SnapshotState(ctx, "slot'1")
	if err != nil || st != (loader.SnapshotState{}) {
		t.Fatalf("fresh state = %+v, %v", st, err)
	}
	for _, want := range []loader.SnapshotState{{LSN: "0/16B3748"}, {LSN: "0/16B3748", Done: true}, {LSN: "1/0"}} {
		if err := s.SetSnapshotState(ctx, "slot'1", want); err != nil {
			t.Fatal(err)
		}
		got, err := s.SnapshotState(ctx, "slot'1")
		if err != nil || got != want {
			t.Fatalf("state = %+v, %v; want %+v", got, err, want)
		}
	}
	if st, err := s.SnapshotState(ctx, "other"); err != nil || st != (loader.SnapshotState{}) {
		t.Fatalf("other slot's state = %+v, %v", st, err)
	}
}

func TestEdgeValues(t *testing.T) {
	s := testSink(t)
	n38 := col("n38", oidNumeric)
	n38.TypeMod = (38<<16 | 0) + 4
	tm := mapTable(t, s, schema.Table{Schema: "public", Name: "edge", Columns: []schema.Column{
		keyCol("id", oidInt4), col("f4", oidFloat4), col("f8", oidFloat8), n38, col("by", oidBytea), col("t", oidText),
	}})
	var all strings.Builder
	all.WriteString(`\x`)
	for c := 0; c < 256; c++ {
		all.WriteString(hex.EncodeToString([]byte{byte(c)}))
	}
	var allText strings.Builder
	for c := 1; c < 256; c++ { // PostgreSQL text holds no NUL
		allText.WriteByte(byte(c))
	}
	max38 := strings.Repeat("9", 38)
	rows := [][]any{
		conv(t, tm, "1", "NaN", "NaN", max38, all.String(), allText.String()),
		conv(t, tm, "2", "Infinity", "Infinity", "-"+max38, `\x0000`, ""),
		conv(t, tm, "3", "-Infinity", "-Infinity", "0", `\x`, "\u2603 '\\` \"\n"),
	}
	var batch []loader.Row
	for _, r := range rows {
		batch = append(batch, loader.Row{Values: r, Version: 1})
	}
	write(t, s, tm, batch...)
	wantLive(t, s, tm, rows...)
}

func TestDecimalTooWide(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("dec"))
	// A value of the wrong type stands for one the driver rejects.
	bad := conv(t, tm, "7", "x", "1")
	bad[2] = "not an int"
	err := s.Write(ctxT(t), &loader.Batch{Table: tm, Rows: []loader.Row{{Values: conv(t, tm, "6", "y", "1")}, {Values: bad}}})
	if err == nil {
		t.Fatal("Write of a bad value succeeded")
	}
	for _, want := range []string{"dec", `"n"`, "id=7"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true", err)
	}
	wantLive(t, s, tm)
}

func TestTortureNames(t *testing.T) {
	s := testSink(t)
	names := []string{"id`x", `we"ird`, "sp ace", "ünï©ødé", "select", "new\nline", "back\\slash", "it's"}
	tbl := schema.Table{Schema: "my schema", Name: "t`a\"b le\n\u00e9select", Columns: []schema.Column{keyCol(names[0], oidInt8)}}
	for _, n := range names[1:] {
		tbl.Columns = append(tbl.Columns, col(n, oidText))
	}
	tm := mapTable(t, s, tbl)
	r1 := conv(t, tm, "1", "a", "b", "c", "d", "e", "f", "g")
	r2 := conv(t, tm, "2", "a", nil, "c", "d", "e", "f", "g")
	write(t, s, tm, loader.Row{Values: r1, Version: 1}, loader.Row{Values: r2, Version: 1})
	u := conv(t, tm, "1", loader.Unchanged, "B", loader.Unchanged, "D", "E", "F", "G")
	write(t, s, tm, loader.Row{Values: u, Version: 2}, deleted(tm, 2, r2[0]))
	wantLive(t, s, tm, conv(t, tm, "1", "a", "B", "c", "D", "E", "F", "G"))
	if err := s.Prepare(ctxT(t), []*schema.TableMap{tm}); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(ctxT(t), tm); err != nil {
		t.Fatal(err)
	}
	wantLive(t, s, tm)
}

func TestConnectErrors(t *testing.T) {
	ctx := ctxT(t)
	_, err := New(ctx, Config{DSN: "clickhouse://ferry:s3cret-pw@127.0.0.1:1/db?dial_timeout=2s"})
	if err == nil {
		t.Fatal("New connected to port 1")
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "native") {
		t.Errorf("error does not say where and how to fix: %v", err)
	}
	if !IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = false", err)
	}
	_, err = New(ctx, Config{DSN: "http://ferry:s3cret-pw@127.0.0.1:8123/db"})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "native") {
		t.Errorf("HTTP DSN: %v", err)
	}
	if IsRetryable(errors.New("x")) || IsRetryable(nil) {
		t.Error("IsRetryable of a plain error")
	}
}

// TestParenNames covers names with parentheses, which clickhouse-go's
// INSERT parser does not take as they are.
func TestParenNames(t *testing.T) {
	s := testSink(t)
	n := col("n(", oidNumeric)
	n.TypeMod = (38<<16 | 2) + 4
	ai := col("a)", oidInt4Array)
	ai.ElemOID, ai.NotNull = oidInt4, true
	tm := mapTable(t, s, schema.Table{Schema: "public", Name: "a(b", Columns: []schema.Column{
		keyCol("i)d", oidInt8), col("v(", oidText), col("f", oidFloat8), n, ai, col("by", oidBytea),
	}})
	r1 := conv(t, tm, "1", "x'\\\n", "NaN", "-"+strings.Repeat("9", 36)+".99", "{1,NULL}", `\x00ff`)
	r2 := conv(t, tm, "2", nil, "-Infinity", nil, "{}", nil)
	write(t, s, tm, loader.Row{Values: r1, Version: 1}, loader.Row{Values: r2, Version: 1})
	write(t, s, tm, loader.Row{Values: conv(t, tm, "2", loader.Unchanged, "1.25", "1", "{3}", loader.Unchanged), Version: 2})
	wantLive(t, s, tm, r1, conv(t, tm, "2", nil, "1.25", "1", "{3}", nil))
}
