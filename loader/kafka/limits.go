package kafka

import (
	"errors"
	"fmt"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ferry-cdc/ferry/schema"
)

// defaultBatchBytes is the publisher's default limit on a record batch:
// under Kafka's default message.max.bytes (1 MiB) by batchOverhead.
const defaultBatchBytes = 960 << 10

// batchOverhead is the room a record batch needs beside its messages'
// bytes (the batch's and the records' headers).
const batchOverhead = 64 << 10

// defaultFetchMaxBytes is the loader's default FetchMaxBytes.
const defaultFetchMaxBytes = 16 << 20

// errRowTooLarge: a row's message does not fit in the publisher's limit,
// or a batch in the broker's. Retrying cannot help, and skipping the row
// would lose it.
var errRowTooLarge = errors.New("kafka: row too large")

// explainTooLarge names the table, the row's key and the settings when a
// publish failed for size, and wraps any other error. It does not wrap
// kafka-go's size errors: they are net.Errors, which the replicator would
// retry for ever.
func (s *Sink) explainTooLarge(err error, tm *schema.TableMap, topic string, rows int) error {
	table := tm.Source.QualifiedName()
	var big kafkago.MessageTooLargeError
	if errors.As(err, &big) {
		key := "a row without a key"
		if k := big.Message.Key; k != nil {
			if len(k) > 200 {
				k = append(k[:200:200], "…"...)
			}
			key = "key " + string(k)
		}
		return fmt.Errorf("%w: a row of %s (%s) makes a message of %d bytes, more than the publisher's limit of %d: "+
			"raise ferry run --kafka-max-message-bytes (FERRY_KAFKA_MAX_MESSAGE_BYTES) above it; the table topics ferry "+
			"creates then take it, but raise an existing topic's max.message.bytes (%s) or the brokers' message.max.bytes "+
			"to that limit + 64 KiB yourself, and ferry load --kafka-fetch-max-bytes to at least the limit",
			errRowTooLarge, table, key, messageBytes(big.Message), s.cfg.BatchBytes, topic)
	}
	if errors.Is(err, kafkago.MessageSizeTooLarge) {
		return fmt.Errorf("%w: the broker refused a batch of rows of %s on topic %s as too large: the topic's max.message.bytes "+
			"(or the brokers' message.max.bytes) is below the publisher's limit, ferry run --kafka-max-message-bytes (%d), + 64 KiB: "+
			"raise the topic's (kafka-configs --alter --entity-type topics --entity-name %s --add-config max.message.bytes=%d) "+
			"or lower the setting to the topic's limit less 64 KiB", errRowTooLarge, table, topic, s.cfg.BatchBytes, topic, s.cfg.BatchBytes+batchOverhead)
	}
	return fmt.Errorf("kafka: publish %d rows of %s to %s: %w", rows, table, topic, err)
}

// messageBytes is about what a message counts against the limit.
func messageBytes(m kafkago.Message) int {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
