package torture_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/ferry-cdc/ferry/torture"
)

// table is the run's summary, one row per ClickHouse server.
type table struct {
	rows     map[string]*row
	order    []string
	failures []string
}

type row struct {
	rounds, kafka, ops, opErrors, faults, tables int
	restarts, restartsInPhase                    int
	rowsChecked, replayed                        uint64
	disagreements, exits                         int
	elapsed                                      time.Duration
}

func (t *table) add(srv torture.Servers, res *torture.Result) {
	if t.rows == nil {
		t.rows = map[string]*row{}
	}
	n := name(srv)
	r := t.rows[n]
	if r == nil {
		r = &row{}
		t.rows[n] = r
		t.order = append(t.order, n)
	}
	r.rounds++
	if res.Kafka {
		r.kafka++
	}
	r.ops += res.Ops
	r.opErrors += res.OpErrors
	r.faults += res.Faults
	r.restarts += res.Restarts
	r.restartsInPhase += res.RestartsInPhase
	r.tables += res.Tables
	r.rowsChecked += res.RowsChecked
	r.replayed += res.Replayed
	r.exits += len(res.Events)
	if res.Failed() {
		r.disagreements++
	}
	r.elapsed += res.Elapsed
}

func (t *table) fail(s string) { t.failures = append(t.failures, s) }

func (t *table) String() string {
	var b strings.Builder
	b.WriteString("| ClickHouse | rounds (through Kafka) | operations (refused) | faults injected (server restarts, in a copy or rebuild) | events (ferry exits of its own, ...) | tables checked | rows checked | rows stored twice (replays FINAL collapses) | disagreements | time |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range t.order {
		r := t.rows[n]
		fmt.Fprintf(&b, "| %s | %d (%d) | %d (%d) | %d (%d, %d) | %d | %d | %d | %d | %d | %s |\n", n, r.rounds, r.kafka, r.ops, r.opErrors, r.faults, r.restarts, r.restartsInPhase, r.exits, r.tables, r.rowsChecked, r.replayed, r.disagreements, r.elapsed.Round(time.Second))
	}
	for _, f := range t.failures {
		b.WriteString("- " + f + "\n")
	}
	return b.String()
}
