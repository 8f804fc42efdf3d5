package torture

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestResyncRequests: the resync draws have a stream of their own, so a
// plan with them is the plan without them plus the requests, each naming
// a table the round creates before its workload.
func TestResyncRequests(t *testing.T) {
	base := Size{Tables: 6, Preload: 10, Workload: 200, Faults: 6, Span: 25 * time.Second, Restarts: 4, RestartEvery: 2, KafkaEvery: 4}
	every := base
	every.ResyncEvery = 1
	for round := uint64(0); round < 8; round++ {
		p0 := NewPlan(12, round, round%2 == 0, base)
		p1 := NewPlan(12, round, round%2 == 0, every)
		var rest []op
		n := 0
		for _, o := range p1.Workload {
			if o.Kind != "resync" {
				rest = append(rest, o)
				continue
			}
			n++
			sql := o.Stmts[0].SQL
			if !strings.Contains(sql, "pg_logical_emit_message(true, 'ferry.resync'") || strings.Contains(sql, "public.new") || strings.Contains(sql, `"new`) {
				t.Errorf("round %d: %s is not a request for a table made before the workload", round, sql)
			}
		}
		if n == 0 || n > 3 {
			t.Errorf("round %d: %d resync requests with ResyncEvery 1, want 1 to 3", round, n)
		}
		if !reflect.DeepEqual(rest, p0.Workload) || !reflect.DeepEqual(p1.Faults, p0.Faults) || !reflect.DeepEqual(p1.Schema, p0.Schema) {
			t.Errorf("round %d: the plan with resyncs is not the plan without them plus those", round)
		}
	}
}
