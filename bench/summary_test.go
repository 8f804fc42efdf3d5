package bench

import (
	"encoding/json"
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

// TestReportEntryWithoutKeptRun checks that a combination whose every run
// was discarded shows no figures in the report: zeros would read as
// measured.
func TestReportEntryWithoutKeptRun(t *testing.T) {
	discarded := RunResult{Run: 1, TPS: 23000, Checks: []Check{{Run: 1, Name: guardAutovacuum, Detail: "workers seen: template1"}}}
	kept := RunResult{Run: 1, Kept: true, TPS: 27000, Rows: 540000, Seconds: 20, WALBytesPerRow: 206,
		Checks: []Check{{Run: 1, Name: "exact row count", Passed: true}}}
	res := &Results{Params: Params{Workloads: []string{"insert"}, Clients: []int{40}, Runs: 1},
		Runs: []Entry{summarize(Strategy{Name: "uuidv4"}, "insert", 40, 90, []RunResult{discarded}),
			summarize(Strategy{Name: "bigserial"}, "insert", 40, 90, []RunResult{kept})}}
	rep := Report(res)
	var row string
	for _, l := range strings.Split(rep, "\n") {
		if strings.HasPrefix(l, "| uuidv4 |") {
			row = l
		}
	}
	if !strings.Contains(row, "no kept run of 1") || strings.Contains(row, " 0 (0–0)") {
		t.Errorf("row of a combination without a kept run: %q", row)
	}
	if header := strings.Split(rep, "\n| strategy |")[1]; strings.Count(strings.SplitN(header, "\n", 2)[0], "|")+2 != strings.Count(row, "|") {
		t.Errorf("row %q has not the header's column count", row)
	}
	if !strings.Contains(rep, "| bigserial | 40 | 27000 (27000–27000) |") {
		t.Errorf("a kept run's row is missing:\n%s", rep)
	}
	if !strings.Contains(rep, "uuidv4         c=40   no kept run") {
		t.Errorf("wait histogram of a combination without a kept run:\n%s", rep)
	}
}

// TestSummarizeSpreadsSamplesAndLag checks that the figures a run samples
// (BufferContent waits, right-edge share, lag) get a median and a range
// over the kept runs, not only the median-tps run's value, and that every
// run keeps its own in results.json.
func TestSummarizeSpreadsSamplesAndLag(t *testing.T) {
	run := func(n int, tps float64, bc int64, peak int64, catchup float64) RunResult {
		return RunResult{Run: n, Kept: true, TPS: tps, Rows: 100, Seconds: 1, RightEdgeShare: float64(bc) / 1000,
			WaitEvents: map[string]int64{"LWLock:BufferContent": bc, "Idle": 10},
			Lag:        &Lag{PeakBytes: peak, PeakSeconds: catchup / 2, CatchupSeconds: catchup},
			Checks:     []Check{{Run: n, Name: "exact row count", Passed: true}}}
	}
	// The median-tps run (tps 200) has the highest BufferContent count.
	runs := []RunResult{run(1, 100, 100, 3000, 0.3), run(2, 200, 900, 1000, 0.1), run(3, 300, 300, 2000, 0.2)}
	e := summarize(Strategy{Name: "bigserial"}, "insert", 40, 90, runs)
	if e.WaitEvents["LWLock:BufferContent"] != 900 {
		t.Errorf("wait events %v: want the median-tps run's", e.WaitEvents)
	}
	if e.BufferContentSamples != 300 || e.Ranges["buffer_content_samples"] != (Spread{Min: 100, Max: 900}) {
		t.Errorf("BufferContent samples %v range %+v, want the median 300 of 100, 300, 900", e.BufferContentSamples, e.Ranges["buffer_content_samples"])
	}
	if e.Ranges["right_edge_pin_share"] != (Spread{Min: 0.1, Max: 0.9}) {
		t.Errorf("right-edge share range %+v", e.Ranges["right_edge_pin_share"])
	}
	if e.Ranges["lag.peak_bytes"] != (Spread{Min: 1000, Max: 3000}) || e.Ranges["lag.catchup_seconds"] != (Spread{Min: 0.1, Max: 0.3}) ||
		e.Ranges["lag.peak_seconds"] != (Spread{Min: 0.05, Max: 0.15}) {
		t.Errorf("lag ranges %+v %+v %+v", e.Ranges["lag.peak_bytes"], e.Ranges["lag.peak_seconds"], e.Ranges["lag.catchup_seconds"])
	}
	raw, err := json.Marshal(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"wait_events":{`, `"lag":{"peak_bytes":3000`} {
		if !strings.Contains(string(raw), k) {
			t.Errorf("a run's JSON lacks %s: %s", k, raw)
		}
	}
}
