package kafka

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// A table topic's partition count is pinned: the count the publisher first
// published to it with is kept on the state topic, and every key goes to
// the partition it hashes to among that many, however many the topic has
// since (kafka-topics --alter --partitions). Hashed among more, a key
// would move to another partition, and its changes there could be loaded
// before its earlier ones still waiting on the old partition: an update
// whose TOASTed values are unchanged would be filled in from a version
// older than the one before it (TestKafkaPartitionsAdded). The partitions
// added stay empty.

func partitionsKey(topic string) string { return "partitions/" + topic }

// partitions is the pinned partition count of a topic, recorded on the
// state topic the first time, and again when this process made the topic
// (deleted, it may come back with another count; empty, no key has a
// partition in it yet).
func (s *Sink) partitions(ctx context.Context, topic string) (int, error) {
	if n := s.parts[topic]; n > 0 {
		return n, nil
	}
	if n := s.created[topic]; n > 0 {
		if err := s.setState(ctx, partitionsKey(topic), []byte(strconv.Itoa(n))); err != nil {
			return 0, err
		}
		delete(s.created, topic)
		return s.pin(topic, n), nil
	}
	now, err := s.topicPartitions(ctx, topic)
	if err != nil {
		return 0, err
	}
	st, err := s.states(ctx)
	if err != nil {
		return 0, err
	}
	raw := st[partitionsKey(topic)]
	if raw == nil {
		if err := s.setState(ctx, partitionsKey(topic), []byte(strconv.Itoa(now))); err != nil {
			return 0, err
		}
		return s.pin(topic, now), nil
	}
	pinned, err := strconv.Atoi(string(raw))
	if err != nil || pinned <= 0 {
		return 0, fmt.Errorf("kafka: %s on %s: %q is not a partition count", partitionsKey(topic), s.cfg.StateTopic(), raw)
	}
	switch {
	case now < pinned:
		return 0, fmt.Errorf("kafka: topic %s has %d partitions, fewer than the %d ferry published to: it was deleted and "+
			"made again by something else than ferry. Delete it again and let ferry make it (ferry run with a new slot, "+
			"so a new snapshot), or delete the key %s from %s if its rows were republished to it some other way",
			topic, now, pinned, partitionsKey(topic), s.cfg.StateTopic())
	case now > pinned:
		s.log.Warn("the topic has more partitions than ferry first published to: each key stays on its partition among the first ones, "+
			"so that its changes stay in order; the others stay empty. To spread the table over more partitions, publish it "+
			"anew to new topics (another --topic-prefix, a new slot)",
			zap.String("topic", topic), zap.Int("partitions", now), zap.Int("used", pinned))
	}
	return s.pin(topic, pinned), nil
}

// pin makes n the topic's partition count for this process.
func (s *Sink) pin(topic string, n int) int {
	s.parts[topic] = n
	s.bal.pin(topic, n)
	return n
}

// topicPartitions is the number of partitions a topic has now. A topic
// just created may take a moment to show in the metadata.
func (s *Sink) topicPartitions(ctx context.Context, topic string) (int, error) {
	for attempt := 0; ; attempt++ {
		md, err := s.admin.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			return 0, fromBrokers(fmt.Errorf("kafka: read the partitions of %s: %w", topic, err))
		}
		for _, t := range md.Topics {
			if t.Name == topic && t.Error == nil && len(t.Partitions) > 0 {
				return len(t.Partitions), nil
			}
		}
		if attempt == 20 {
			return 0, fromBrokers(fmt.Errorf("kafka: topic %s has no partitions", topic))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// balancer puts a truncation's messages one on each partition, and every
// other message where the Java client's partitioner would (murmur2 of the
// key) among the topic's pinned partitions, so all changes of a row go to
// one partition. kafka-go calls it from WriteMessages.
type balancer struct {
	kafkago.Murmur2Balancer
	mu     sync.Mutex
	pinned map[string]int // by topic
}

func (b *balancer) pin(topic string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pinned[topic] = n
}

func (b *balancer) Balance(m kafkago.Message, partitions ...int) int {
	if h := header(m, HeaderTruncate); h != nil {
		_, i, _ := strings.Cut(string(h), ":")
		i, _, _ = strings.Cut(i, ":")
		n, _ := strconv.Atoi(i)
		return partitions[n%len(partitions)]
	}
	b.mu.Lock()
	n := b.pinned[m.Topic]
	b.mu.Unlock()
	if n > 0 && n < len(partitions) {
		partitions = partitions[:n] // kafka-go lists them 0, 1, ...
	}
	if m.Key == nil {
		if rk := header(m, HeaderRowKey); rk != nil { // a FullRow table's event: by its row key
			m.Key = rk
		}
	}
	return b.Murmur2Balancer.Balance(m, partitions...)
}
