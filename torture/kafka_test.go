package torture

import (
	"reflect"
	"testing"
	"time"
)

// TestKafkaRounds: the Kafka draw has a stream of its own, so a Kafka
// plan is the direct plan without its restarts, with the process each
// kill9 and sigterm hits named; a round auto chose (KafkaEvery 4) is the
// one -torture.kafka always (KafkaEvery 1) replays; and a size without
// Kafka rounds makes the plans it made before them.
func TestKafkaRounds(t *testing.T) {
	base := Size{Tables: 4, Preload: 5, Workload: 60, Faults: 6, Span: 8 * time.Second, Restarts: 3, RestartEvery: 2}
	auto, always := base, base
	auto.KafkaEvery, always.KafkaEvery = 4, 1
	chosen, named := 0, 0
	for round := uint64(0); round < 8; round++ {
		p0 := NewPlan(5, round, round%2 == 0, base)
		p1 := NewPlan(5, round, round%2 == 0, always)
		if p0.Kafka || !p1.Kafka || p1.HasRestarts() {
			t.Fatalf("round %d: Kafka %v without Kafka rounds, %v with every round one (restarts: %v)", round, p0.Kafka, p1.Kafka, p1.HasRestarts())
		}
		others, _ := splitFaults(p0.Faults)
		if len(others) != len(p1.Faults) {
			t.Fatalf("round %d: faults %v through Kafka, %v direct", round, p1.Faults, p0.Faults)
		}
		for i, f := range p1.Faults {
			if (f.Kind == "kill9" || f.Kind == "sigterm") != (f.Of == "run" || f.Of == "load") {
				t.Errorf("round %d: fault %s names process %q", round, f.Kind, f.Of)
			}
			named += len(f.Of)
			f.Of = ""
			if f != others[i] {
				t.Errorf("round %d: fault %d is %v through Kafka, %v direct", round, i, f, others[i])
			}
		}
		if !reflect.DeepEqual(p0.Schema, p1.Schema) || !reflect.DeepEqual(p0.Preload, p1.Preload) ||
			!reflect.DeepEqual(p0.Workload[:min(len(p0.Workload), len(p1.Workload))], p1.Workload) {
			t.Errorf("round %d: the Kafka plan's operations are not the direct plan's", round)
		}
		if pa := NewPlan(5, round, round%2 == 0, auto); pa.Kafka {
			chosen++
			if !reflect.DeepEqual(pa, p1) {
				t.Errorf("round %d: -torture.kafka always does not replay the Kafka round auto chose", round)
			}
		}
	}
	if chosen == 0 || chosen == 8 || named == 0 {
		t.Errorf("auto chose %d of 8 rounds; %d bytes of process names", chosen, named)
	}
}
