package kafka_test

import (
	"context"
	"testing"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ferry-cdc/ferry/loader/kafka"
)

// addPartitions raises a topic's partition count, as
// kafka-topics --alter --partitions does.
func (e *env) addPartitions(topic string, count int) {
	e.t.Helper()
	admin := &kafkago.Client{Addr: kafkago.TCP(e.brokers...)}
	res, err := admin.CreatePartitions(context.Background(), &kafkago.CreatePartitionsRequest{
		Topics: []kafkago.TopicPartitionsConfig{{Name: topic, Count: int32(count)}}})
	if err == nil {
		err = res.Errors[topic]
	}
	if err != nil {
		e.t.Fatalf("add partitions to %s: %v", topic, err)
	}
}

// TestKafkaPartitionsAdded gives a table topic more partitions between a
// key's update of a TOASTed body and a later update that leaves the body
// unchanged. Were the later one published to the key's new partition, a
// loader could read it before the earlier one, which waits behind many
// rows on the old partition, and fill in the body from the version before
// both. ClickHouse must equal PostgreSQL.
func TestKafkaPartitionsAdded(t *testing.T) {
	e := newEnv(t)
	e.exec(keyChangeSQL,
		`INSERT INTO docs SELECT g, 0, 'filler' FROM generate_series(1000, 20999) g`)
	slot := e.db + "_k"
	e.publish(slot, 2)
	sink := e.chSink("_kafka")
	if err := e.load(sink, "grow", 300); err != nil {
		t.Fatal(err)
	}
	e.exec(`UPDATE docs SET n = n + 1 WHERE id >= 1000`, `UPDATE docs SET n = n + 1 WHERE id >= 1000`,
		`UPDATE docs SET body = 'v1 ' || body WHERE id < 1000`)
	e.publish(slot, 2)
	e.addPartitions(kafka.TableTopic("it", "public", "docs"), 8)
	e.exec(`UPDATE docs SET n = -1 WHERE id < 1000`) // body unchanged
	e.publish(slot, 2)
	if err := e.load(sink, "grow", 300); err != nil {
		t.Fatal(err)
	}
	e.verifyAll(sink)
	// Also when the loader happens to read the old partitions first: no
	// message went to the partitions added.
	topic := kafka.TableTopic("it", "public", "docs")
	req := &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{}}
	for p := 0; p < 8; p++ {
		req.Topics[topic] = append(req.Topics[topic], kafkago.LastOffsetOf(p))
	}
	res, err := (&kafkago.Client{Addr: kafkago.TCP(e.brokers...)}).ListOffsets(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Topics[topic] {
		if p.Partition >= 2 && p.LastOffset != 0 {
			t.Errorf("partition %d, added, holds %d messages", p.Partition, p.LastOffset)
		}
	}
}
