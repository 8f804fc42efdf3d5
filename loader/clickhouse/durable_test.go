package clickhouse

import (
	"os"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/loader"
)

// TestFsync: with Config.Fsync, every table the sink creates, its state
// tables included, carries fsync_after_insert and fsync_part_directory,
// and rows still arrive; a server without the settings (18.16) refuses
// the sink at once, naming them.
func TestFsync(t *testing.T) {
	plain := testSink(t)
	var n uint64
	if err := plain.conn.QueryRow(ctxT(t), "SELECT count() FROM system.merge_tree_settings WHERE name IN ('fsync_after_insert', 'fsync_part_directory')").Scan(&n); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctxT(t), Config{DSN: os.Getenv("FERRY_CH_URL"), Database: plain.db, Fsync: true})
	if n < 2 {
		if err == nil {
			s.Close()
			t.Fatalf("ClickHouse %s lacks the fsync settings, and a sink with Fsync started", plain.version)
		}
		for _, want := range []string{"--ch-fsync", "fsync_after_insert", plain.version} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %s", err, want)
			}
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm := mapTable(t, s, kvTable("durable"))
	write(t, s, tm, loader.Row{Values: conv(t, tm, "1", "a", "1"), Version: 1})
	wantLive(t, s, tm, conv(t, tm, "1", "a", "1"))
	if err := s.SetSnapshotState(ctxT(t), "slot", loader.SnapshotState{LSN: "0/1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTableState(ctxT(t), "slot", 1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{tm.Name, snapshotTable, tableStateTable} {
		var ddl string
		if err := s.conn.QueryRow(ctxT(t), "SELECT create_table_query FROM system.tables WHERE database = ? AND name = ?", s.db, table).Scan(&ddl); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		for _, want := range []string{"fsync_after_insert = 1", "fsync_part_directory = 1"} {
			if !strings.Contains(ddl, want) {
				t.Errorf("%s lacks %s: %s", table, want, ddl)
			}
		}
	}
}
