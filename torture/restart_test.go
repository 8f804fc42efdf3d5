package torture

import (
	"reflect"
	"testing"
	"time"
)

// TestRestartsLeavePlansAsTheyWere: restart faults come from a stream of
// their own, so a plan with them is the plan without them plus restart
// faults (and, for a fault that waits for a rebuild, one operation at the
// end): the rounds found before restarts existed reproduce unchanged.
func TestRestartsLeavePlansAsTheyWere(t *testing.T) {
	base := Size{Tables: 4, Preload: 5, Workload: 60, Faults: 3, Span: 8 * time.Second}
	with := base
	with.Restarts, with.RestartEvery = 4, 1
	restarted := 0
	for seed := uint64(1); seed <= 6; seed++ {
		p0 := NewPlan(seed, 3, seed%2 == 0, base)
		p1 := NewPlan(seed, 3, seed%2 == 0, with)
		if p0.HasRestarts() {
			t.Fatalf("seed %d: a size without restarts made restart faults", seed)
		}
		others, restarts := splitFaults(p1.Faults)
		if len(restarts) > 0 {
			restarted++
		}
		if !reflect.DeepEqual(p0.Schema, p1.Schema) || !reflect.DeepEqual(p0.Preload, p1.Preload) ||
			!reflect.DeepEqual(p0.Faults, others) || len(p1.Workload) < len(p0.Workload) ||
			!reflect.DeepEqual(p0.Workload, p1.Workload[:len(p0.Workload)]) {
			t.Errorf("seed %d: the plan with restarts is not the plan without them plus restarts", seed)
		}
		if extra := len(p1.Workload) - len(p0.Workload); extra > 1 {
			t.Errorf("seed %d: %d operations added, want at most the rebuild's", seed, extra)
		}
	}
	if restarted != 6 {
		t.Errorf("%d of 6 plans restart servers with RestartEvery 1", restarted)
	}
}

// TestShrinkKeepsRestarts: the shrinker's cuts never remove a restart
// fault, and OpCount does not count them, so every cut it tries is one.
func TestShrinkKeepsRestarts(t *testing.T) {
	p := &Plan{
		Preload:  []op{{ID: 1}, {ID: 2}},
		Workload: []op{{ID: 3}, {ID: 4}},
		Faults: []fault{{At: 1, Kind: "kill9"}, {At: 2, Kind: "crash-pg", When: "copy"},
			{At: 3, Kind: "cut-ch"}, {At: 4, Kind: "restart-ch"}},
	}
	if n := p.OpCount(); n != 6 {
		t.Fatalf("OpCount = %d, want 6 (the restart faults are not counted)", n)
	}
	for lo := 0; lo < p.OpCount(); lo++ {
		for hi := lo + 1; hi <= p.OpCount(); hi++ {
			c := p.without(lo, hi)
			if _, r := splitFaults(c.Faults); len(r) != 2 {
				t.Fatalf("without(%d, %d) kept %d restart faults, want 2: %v", lo, hi, len(r), c.Faults)
			}
			if c.OpCount() != p.OpCount()-(hi-lo) {
				t.Fatalf("without(%d, %d) has %d operations, want %d", lo, hi, c.OpCount(), p.OpCount()-(hi-lo))
			}
		}
	}
	if c := p.without(4, 6); !reflect.DeepEqual(c.Faults, []fault{{At: 2, Kind: "crash-pg", When: "copy"}, {At: 4, Kind: "restart-ch"}}) {
		t.Errorf("without the last two operations, the faults are %v", c.Faults)
	}
}
