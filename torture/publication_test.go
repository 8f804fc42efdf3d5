package torture

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestPublicationChanges: the publication draws have a stream of their
// own, so a plan with them is the plan without them plus the ALTER
// PUBLICATION ops; each add-back runs in the drop's session after it; and
// -torture.avoid publication leaves them out.
func TestPublicationChanges(t *testing.T) {
	base := Size{Tables: 6, Preload: 10, Workload: 200, Faults: 6, Span: 25 * time.Second, Restarts: 4, RestartEvery: 2, KafkaEvery: 4}
	every := base
	every.PublicationEvery = 1
	avoided := every
	avoided.Avoid = []string{"publication"}
	drops, adds := 0, 0
	for round := uint64(0); round < 8; round++ {
		p0 := NewPlan(11, round, round%2 == 0, base)
		p1 := NewPlan(11, round, round%2 == 0, every)
		if pa := NewPlan(11, round, round%2 == 0, avoided); !reflect.DeepEqual(pa, p0) {
			t.Errorf("round %d: avoiding publication changes does not give the plan without them", round)
		}
		var rest []op
		dropped := map[string]int{} // statement's table -> session of the drop
		for _, o := range p1.Workload {
			switch o.Kind {
			case "publication-drop-table", "publication-add-table":
				sql := o.Stmts[0].SQL
				_, tbl, _ := strings.Cut(sql, " TABLE ")
				if o.Kind == "publication-drop-table" {
					drops++
					dropped[tbl] = o.Session
					if strings.Contains(tbl, `"new`) || strings.HasPrefix(tbl, "public.new") {
						t.Errorf("round %d: %s drops a table the workload creates", round, sql)
					}
				} else {
					adds++
					if s, ok := dropped[tbl]; !ok || s != o.Session {
						t.Errorf("round %d: %s (session %d) does not follow its drop in the same session (%v)", round, sql, o.Session, dropped)
					}
				}
			default:
				rest = append(rest, o)
			}
		}
		if len(dropped) == 0 {
			t.Errorf("round %d: no publication change with PublicationEvery 1", round)
		}
		if !reflect.DeepEqual(rest, p0.Workload) || !reflect.DeepEqual(p1.Faults, p0.Faults) || !reflect.DeepEqual(p1.Schema, p0.Schema) {
			t.Errorf("round %d: the plan with publication changes is not the plan without them plus those", round)
		}
	}
	if drops == 0 || adds == 0 || adds > drops {
		t.Errorf("%d drops, %d adds back", drops, adds)
	}
}
