package chaostest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// result is one line of the report.
type result struct {
	scenario string
	runs     int   // faults injected
	written  int64 // rows the writer changed (plus the seed)
	lost     int
	doubled  int
	peakRSS  int64         // of any ferry run of the scenario
	recovery time.Duration // longest, from a fault's end until ClickHouse caught up
	note     string
}

var (
	resultsMu sync.Mutex
	results   []result
)

// record logs a scenario's result line and keeps it for the report.
func record(t *testing.T, r result) {
	t.Helper()
	t.Logf("RESULT scenario=%q runs=%d rows_written=%d rows_lost=%d rows_doubled=%d peak_rss=%s recovery=%s %s",
		r.scenario, r.runs, r.written, r.lost, r.doubled, mib(r.peakRSS), r.recovery.Round(10*time.Millisecond), r.note)
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, r)
}

// writeReport writes the results as a markdown table, when path is set.
func writeReport(path string) error {
	if path == "" {
		return nil
	}
	resultsMu.Lock()
	defer resultsMu.Unlock()
	m := currentMode()
	var b strings.Builder
	name := "short"
	if m.full {
		name = "full (CHAOS=full)"
	}
	fmt.Fprintf(&b, "Chaos suite, %s mode, %s. Writer: transactions of 1 to %d rows.\n\n", name, time.Now().UTC().Format("2006-01-02 15:04 UTC"), m.maxTx)
	b.WriteString("| scenario | runs | rows written | rows lost | rows doubled | peak RSS of ferry | recovery (longest) | notes |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s |\n", r.scenario, r.runs, r.written, r.lost, r.doubled,
			mib(r.peakRSS), r.recovery.Round(10*time.Millisecond), r.note)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
