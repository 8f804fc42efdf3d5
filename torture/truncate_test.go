package torture

import (
	"context"
	"os"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/schema"
)

// TestTruncateSurvivesRestart empties a table with the ClickHouse sink's
// Truncate, restarts the server, and counts the table's rows. ClickHouse
// 18.16 leaves on disk, for 8 minutes, the parts a merge was reading when
// TRUNCATE ran, and loads them again at its next start: ferry torture seed
// 883963 round 1 with restarts found 183 keys deleted in PostgreSQL
// visible in ClickHouse after a ClickHouse restart 6 s after ferry had
// truncated the table. The server is one of the test's own, of the same
// kind as FERRY_CH_URL's (restarting needs root; the test skips without).
func TestTruncateSurvivesRestart(t *testing.T) {
	dsn := os.Getenv("FERRY_CH_URL")
	if dsn == "" {
		t.Skip("FERRY_CH_URL is not set: run `make stack-up` and `. .stack/env`")
	}
	if os.Geteuid() != 0 {
		t.Skip("restarting a ClickHouse server of the test's own needs root")
	}
	var chdb *CHDB
	if !legacyServer(t, dsn) {
		chdb = &CHDB{Lib: os.Getenv("FERRY_CHDB_LIB"), Launcher: os.Getenv("FERRY_CHDB_LAUNCHER"), Shield: os.Getenv("FERRY_CHDB_SHIELD")}
	}
	srv, err := startCH(chdb)
	if err != nil {
		t.Skipf("no ClickHouse server of the test's own: %v", err)
	}
	t.Cleanup(srv.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sink := func() *clickhouse.Sink {
		s, err := clickhouse.New(ctx, clickhouse.Config{DSN: srv.url(), Database: "ferry_truncate"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := sink()
	tm, err := schema.Map(schema.Table{Schema: "public", Name: "docs", Columns: []schema.Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true, NotNull: true},
		{Name: "body", TypeOID: 25, TypeMod: -1},
	}}, s.Capabilities())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx, []*schema.TableMap{tm}); err != nil {
		t.Fatal(err)
	}
	// One insert is one part; from about five, 18.16 starts merging them.
	for i := int64(1); i <= 10; i++ {
		row := loader.Row{Values: []any{i, "before the truncation"}, Version: uint64(i)}
		if err := s.Write(ctx, &loader.Batch{Table: tm, Rows: []loader.Row{row}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Truncate(ctx, tm); err != nil {
		t.Fatal(err)
	}
	after := loader.Row{Values: []any{int64(11), "after the truncation"}, Version: 11}
	if err := s.Write(ctx, &loader.Batch{Table: tm, Rows: []loader.Row{after}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if err := srv.restart(false); err != nil {
		t.Fatal(err)
	}
	s = sink()
	defer s.Close()
	n, err := s.CountLive(ctx, tm)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("after a restart the table holds %d live rows, want 1 (the one written after the truncation)", n)
	}
}

// legacyServer reports whether the server at dsn is older than 22.8.
func legacyServer(t *testing.T, dsn string) bool {
	t.Helper()
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	v, err := conn.ServerVersion()
	if err != nil {
		t.Fatalf("ClickHouse at %s: %v", dsn, err)
	}
	return v.Version.Major < 22 || v.Version.Major == 22 && v.Version.Minor < 8
}
