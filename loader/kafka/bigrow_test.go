package kafka_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
)

// bigRowsSQL makes rows larger than Kafka's default 1 MiB: a 20 MB jsonb
// (md5 text, which TOAST cannot shrink much), a 99,999-element date array,
// and a row that is only a little over the default.
const bigRowsSQL = `CREATE TABLE big (id int PRIMARY KEY, note text, j jsonb, d date[] NOT NULL DEFAULT '{}');
	INSERT INTO big (id, note, j) SELECT 1, 'copy', jsonb_build_object('k', string_agg(md5(g::text), '')) FROM generate_series(1, 650000) g;
	INSERT INTO big (id, note, d) SELECT 2, 'dates', array_agg(date '2000-01-01' + g) FROM generate_series(1, 99999) g;
	INSERT INTO big (id, note, j) SELECT 3, 'small', '{}'`

// publishWith runs the replicator into a publisher of cfg until caught up.
func (e *env) publishWith(slot string, cfg kafka.Config) error {
	e.t.Helper()
	cfg.Client, cfg.Database = e.client(), e.db
	s, err := kafka.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close()
	r, err := replicator.New(e.config(slot), s, s, s.Capabilities(), kafka.IsRetryable)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return r.Run(ctx)
}

// ferry runs the ferry binary to its end, with the test's environment
// less its FERRY_* variables, and fails the test if it fails.
func (e *env) ferry(bin string, args ...string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FERRY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("ferry %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestKafkaBigRows sends rows of 20 MB through Kafka with ferry run and
// ferry load, copied and streamed (an insert, and updates that leave the
// big values unchanged), with both limits raised by their flags on a
// broker of Kafka's default limits: ClickHouse holds what PostgreSQL
// holds.
func TestKafkaBigRows(t *testing.T) {
	e := newEnv(t)
	bin := buildFerry(t)
	e.exec(bigRowsSQL)
	run := []string{"--log-format", "json", "run", "--sink", "kafka", "--pg", e.pgURL, "--slot", e.db + "_k",
		"--kafka-brokers", strings.Join(e.brokers, ","), "--topic-prefix", "it", "--kafka-partitions", "2",
		"--kafka-max-message-bytes", "50331648", "--catch-up", "--metrics-addr", ""}
	e.ferry(bin, run...)
	e.exec(`INSERT INTO big (id, note, j) SELECT 4, 'stream', jsonb_build_object('k', string_agg(md5(g::text), 'x')) FROM generate_series(1, 650000) g`,
		`UPDATE big SET note = 'updated' WHERE id IN (1, 4)`)
	e.ferry(bin, run...)
	e.ferry(bin, "--log-format", "json", "load", "--from-kafka", "--kafka-brokers", strings.Join(e.brokers, ","),
		"--topic-prefix", "it", "--ch", e.chURL, "--ch-database", e.db+"_kafka", "--group", "big",
		"--kafka-fetch-max-bytes", "50331648", "--catch-up", "--metrics-addr", "")
	e.verifyAll(e.chSink("_kafka"))
}

// TestKafkaRowTooBig publishes a 20 MB row with the default limit: the
// publisher stops, naming the table, the row's key and the setting to
// raise, instead of retrying or skipping it.
func TestKafkaRowTooBig(t *testing.T) {
	e := newEnv(t)
	e.exec(bigRowsSQL)
	err := e.publishWith(e.db+"_k", kafka.Config{})
	if err == nil {
		t.Fatal("a 20 MB row passed a 960 KiB limit")
	}
	t.Logf("the error: %v", err)
	if kafka.IsRetryable(err) {
		t.Errorf("retryable: %v", err)
	}
	for _, want := range []string{`"public"."big"`, `"id":1`, "--kafka-max-message-bytes", "message.max.bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
}

// TestKafkaTopicLimitTooLow raises the publisher's limit for a topic that
// exists with the broker's default limit: the broker refuses the 20 MB
// row, and the publisher stops, naming the topic and how to raise its
// limit.
func TestKafkaTopicLimitTooLow(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE big (id int PRIMARY KEY, note text, j jsonb, d date[] NOT NULL DEFAULT '{}')`)
	slot := e.db + "_k"
	if err := e.publishWith(slot, kafka.Config{}); err != nil { // creates the topic with the default limit
		t.Fatal(err)
	}
	e.exec(`INSERT INTO big (id, note, j) SELECT 1, 'stream', jsonb_build_object('k', string_agg(md5(g::text), '')) FROM generate_series(1, 650000) g`)
	err := e.publishWith(slot, kafka.Config{BatchBytes: 48 << 20})
	t.Logf("the error: %v", err)
	if err == nil || kafka.IsRetryable(err) {
		t.Fatalf("the publisher should stop: %v", err)
	}
	for _, want := range []string{`"public"."big"`, "it.public.big", "max.message.bytes=50397184", "--kafka-max-message-bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s", want)
		}
	}
}
