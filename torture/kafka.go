package torture

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Kafka rounds (issue 15: faults through the direct path and through
// Kafka). ferry run --sink kafka publishes into an in-process TEST broker
// (kfake, one per round, gone with the round), and ferry load --from-kafka
// writes the topics into the round's ClickHouse database; both run at once
// under the faults: kill9 and sigterm hit the process the fault names
// (fault.Of), cut-pg ferry run's PostgreSQL connections, cut-ch and
// stall-ch the loader's ClickHouse ones. The catch-up runs ferry run
// --catch-up, then ferry load --catch-up; the checks are the direct
// path's, against the database the loader made. A Kafka round restarts no
// server: the restart faults stay on the direct path.

// kafkaStream is the PCG stream a round's Kafka draws come from, so that
// a size without Kafka rounds generates the plans it did before them.
const kafkaStream = 0x6b61666b61726f75

// addKafka makes one round in sz.KafkaEvery a Kafka round and names the
// process each of its kill9 and sigterm faults hits.
func addKafka(p *Plan, sz Size) {
	if sz.KafkaEvery <= 0 {
		return
	}
	r := rand.New(rand.NewPCG(p.Seed^kafkaStream, p.Round))
	// One draw whatever KafkaEvery is, so that the draws below are the
	// same when -torture.kafka always replays a round auto chose.
	if r.Uint64()%uint64(sz.KafkaEvery) != 0 {
		return
	}
	p.Kafka = true
	for i := range p.Faults {
		if k := p.Faults[i].Kind; k == "kill9" || k == "sigterm" {
			p.Faults[i].Of = []string{"run", "load"}[r.IntN(2)]
		}
	}
}

// startKafka starts the round's broker.
func (e *env) startKafka() error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("kafka broker (kfake): %w", err)
	}
	e.kafka = c
	return nil
}

func (e *env) brokers() string { return strings.Join(e.kafka.ListenAddrs(), ",") }

// kafkaArgs are ferry run's flags that send a Kafka round's changes to
// the broker, under topics of the round's own prefix.
func (e *env) kafkaArgs() []string {
	return []string{"--sink", "kafka", "--kafka-brokers", e.brokers(), "--topic-prefix", e.name}
}

// loadArgs are ferry load's flags for the round (ClickHouse URL given):
// the round's database, as the direct path's, so that the checks and
// ferry verify read the same tables either way.
func (e *env) loadArgs(chURL string) []string {
	return []string{"load", "--from-kafka", "--kafka-brokers", e.brokers(), "--topic-prefix", e.name,
		"--ch", chURL, "--ch-database", e.name, "--group", e.name, "--metrics-addr", "", "--batch-age", "100ms"}
}
