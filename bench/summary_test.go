package bench

import (
	"strings"
	"testing"
	"time"
)

func TestSummarizeMedianSpreadAndDiscard(t *testing.T) {
	pass := func(run int) []Check { return []Check{{Run: run, Name: "exact row count", Passed: true}} }
	runs := []RunResult{
		{Run: 1, Kept: true, TPS: 100, Rows: 1000, Seconds: 10, WALBytesPerRow: 300, Checks: pass(1), WaitEvents: map[string]int64{"a": 1}},
		{Run: 2, Kept: false, TPS: 999, Rows: 1000, Seconds: 10, Checks: []Check{{Run: 2, Name: "exact row count", Detail: "table holds 1 rows, expected 2"}}},
		{Run: 3, Kept: true, TPS: 300, Rows: 3000, Seconds: 10, WALBytesPerRow: 100, Checks: pass(3), WaitEvents: map[string]int64{"b": 1}},
		{Run: 4, Kept: true, TPS: 200, Rows: 2000, Seconds: 10, WALBytesPerRow: 200, Checks: pass(4), WaitEvents: map[string]int64{"c": 1},
			IndexBytes: 4000, TableRows: 100},
	}
	e := summarize(Strategy{Name: "bigserial"}, "insert", 40, 90, runs)
	if e.N != 3 || e.TPS != 200 || e.WALBytesPerRow != 200 || e.Spread != (Spread{Min: 100, Max: 300}) {
		t.Fatalf("n %d tps %v wal %v spread %+v", e.N, e.TPS, e.WALBytesPerRow, e.Spread)
	}
	if e.WaitEvents["c"] != 1 {
		t.Errorf("wait events %v: want the median run's (run 4)", e.WaitEvents)
	}
	if len(e.Discarded) != 1 || e.Discarded[0].Run != 2 || !strings.Contains(e.Discarded[0].Reason, "expected 2") {
		t.Errorf("discarded %+v", e.Discarded)
	}
	if !e.Sanity.Passed {
		t.Error("sanity should pass: every kept run passed its checks")
	}
	if e.BytesPerRow != 0 || e.Ranges["bytes_per_row"] != (Spread{Min: 0, Max: 40}) {
		t.Errorf("bytes per row %v range %+v, want the median of the kept runs (0) and their range 0–40", e.BytesPerRow, e.Ranges["bytes_per_row"])
	}
	if e.Ranges["wal_bytes_per_row"] != (Spread{Min: 100, Max: 300}) || e.IndexBytes != 0 {
		t.Errorf("WAL range %+v index bytes %d", e.Ranges["wal_bytes_per_row"], e.IndexBytes)
	}
	all := summarize(Strategy{Name: "x"}, "insert", 1, 90, runs[1:2])
	if all.Sanity.Passed || all.N != 0 {
		t.Errorf("with every run discarded: passed %v n %d", all.Sanity.Passed, all.N)
	}
}

func TestLagFromSamples(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := &lagSampler{start: t0, stop: make(chan struct{}), points: []lagPoint{
		{at(0), 1000, 1000},
		{at(250), 2000, 1000}, // WAL passed 1000 at 250 ms
		{at(500), 3000, 1500}, // oldest unconfirmed (1500) written by 250 ms
		{at(750), 3000, 3000},
	}}
	lag, err := l.finish(at(600), at(750))
	if err != nil {
		t.Fatal(err)
	}
	want := []LagSample{{0, 0, 0}, {0.25, 1000, 0}, {0.5, 1500, 0.25}, {0.75, 0, 0}}
	for i, s := range lag.Samples {
		if s != want[i] {
			t.Errorf("sample %d = %+v, want %+v", i, s, want[i])
		}
	}
	if lag.PeakBytes != 1500 || lag.PeakSeconds != 0.25 || lag.CatchupSeconds < 0.149 || lag.CatchupSeconds > 0.151 {
		t.Errorf("peak %d bytes %v s, catch-up %v", lag.PeakBytes, lag.PeakSeconds, lag.CatchupSeconds)
	}
}

func TestDDL(t *testing.T) {
	h, _ := strategyByName("hash8")
	stmts := h.DDL(8, 0)
	if len(stmts) != 9 || !strings.Contains(stmts[0], "PARTITION BY HASH (id)") || !strings.Contains(stmts[8], "REMAINDER 7") {
		t.Errorf("hash8 DDL: %q", stmts)
	}
	f, _ := strategyByName("fillfactor70")
	if s := f.DDL(8, 0)[0]; !strings.Contains(s, "PRIMARY KEY (id) WITH (fillfactor = 70)") {
		t.Errorf("fillfactor70 DDL: %s", s)
	}
	i, _ := strategyByName("identity")
	if s := i.DDL(8, 16)[0]; !strings.Contains(s, "GENERATED ALWAYS AS IDENTITY") || !strings.Contains(s, "payload text") {
		t.Errorf("identity DDL with payload: %s", s)
	}
	if _, err := strategyByName("uuidv8"); err == nil {
		t.Error("unknown strategy accepted")
	}
}
