package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ferry-cdc/ferry/loader"
)

var nullJSON = json.RawMessage("null")

func versionNumber(v uint64) json.Number { return json.Number(strconv.FormatUint(v, 10)) }

// jsonMessage is a message whose value is v's JSON.
func jsonMessage(topic string, key []byte, v any) (kafkago.Message, error) {
	value, err := json.Marshal(v)
	if err != nil {
		return kafkago.Message{}, fmt.Errorf("%w: %v", errEncoding, err)
	}
	return kafkago.Message{Topic: topic, Key: key, Value: value}, nil
}

// schemaValue is the schema-changes message describing t.
func schemaValue(topic string, t *table) (kafkago.Message, error) {
	return jsonMessage(topic, []byte(t.schemaID), schemaMessage{ID: t.schemaID, Topic: t.topic, Table: t.tm.Source})
}

// The state topic's keys.
func snapshotKey(slot string) string { return "snapshot/" + slot }
func tableKey(slot string, oid uint32) string {
	return "table/" + slot + "/" + strconv.FormatUint(uint64(oid), 10)
}
func tablePrefix(slot string) string     { return "table/" + slot + "/" }
func truncationKey(prefix string) string { return "truncation/" + prefix }

// states reads the state topic once; later calls use what the sink has
// since written, as it is the slot's only writer.
func (s *Sink) states(ctx context.Context) (map[string][]byte, error) {
	if s.state != nil {
		return s.state, nil
	}
	if err := s.ensureTopic(ctx, s.cfg.StateTopic(), 1, true); err != nil {
		return nil, err
	}
	st := map[string][]byte{}
	err := readTopic(ctx, s.cfg.Client, s.cfg.StateTopic(), func(m kafkago.Message) error {
		st[string(m.Key)] = m.Value
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: read %s: %w", s.cfg.StateTopic(), err)
	}
	s.state = st
	return st, nil
}

func (s *Sink) setState(ctx context.Context, key string, value []byte) error {
	st, err := s.states(ctx)
	if err != nil {
		return err
	}
	msg := kafkago.Message{Topic: s.cfg.StateTopic(), Key: []byte(key), Value: value}
	if err := s.write(ctx, msg); err != nil {
		return fmt.Errorf("kafka: write %s to %s: %w", key, s.cfg.StateTopic(), err)
	}
	st[key] = value
	return nil
}

// SnapshotState returns the last state set for the slot.
func (s *Sink) SnapshotState(ctx context.Context, slot string) (loader.SnapshotState, error) {
	st, err := s.states(ctx)
	if err != nil {
		return loader.SnapshotState{}, err
	}
	var state loader.SnapshotState
	if raw := st[snapshotKey(slot)]; raw != nil {
		if err := json.Unmarshal(raw, &state); err != nil {
			return loader.SnapshotState{}, fmt.Errorf("kafka: read the snapshot state of slot %q: %w", slot, err)
		}
	}
	s.snapshotLSN = parseLSN(state.LSN)
	return state, nil
}

// SetSnapshotState records st for the slot, acked by every in-sync broker.
func (s *Sink) SetSnapshotState(ctx context.Context, slot string, st loader.SnapshotState) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	s.snapshotLSN = parseLSN(st.LSN)
	if st.Done {
		if err := s.releaseHeld(ctx, true); err != nil {
			return err
		}
	}
	s.initial = !st.Done
	return s.setState(ctx, snapshotKey(slot), raw)
}

// releaseHeld publishes the initial snapshot's held row, as its last when
// the snapshot is done. A held row is not yet in Kafka: if the publisher
// stops before, the snapshot is not done, and the next start copies it
// again.
func (s *Sink) releaseHeld(ctx context.Context, last bool) error {
	h := s.held
	if h == nil {
		return nil
	}
	m := h.msg
	if last {
		m = h.asEnd
	}
	if err := s.write(ctx, m); err != nil {
		return s.explainTooLarge(err, h.t.tm, h.t.topic, 1)
	}
	s.held = nil
	return nil
}

// TableStates returns the last state set for each table of the slot.
func (s *Sink) TableStates(ctx context.Context, slot string) (map[uint32][]byte, error) {
	st, err := s.states(ctx)
	if err != nil {
		return nil, err
	}
	out := map[uint32][]byte{}
	p := tablePrefix(slot)
	for k, v := range st {
		if len(k) > len(p) && k[:len(p)] == p {
			oid, err := strconv.ParseUint(k[len(p):], 10, 32)
			if err == nil {
				out[uint32(oid)] = v
			}
		}
	}
	return out, nil
}

// SetTableState records a table's state for the slot.
func (s *Sink) SetTableState(ctx context.Context, slot string, oid uint32, state []byte) error {
	return s.setState(ctx, tableKey(slot, oid), state)
}

// readTopic calls fn for every message of partition 0 of a topic, from the
// first to the last one there when it is called.
func readTopic(ctx context.Context, c Client, topic string, fn func(kafkago.Message) error) error {
	first, last, err := partitionBounds(ctx, c, topic, 0)
	if err != nil || last <= first {
		return err
	}
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: c.Brokers, Topic: topic, Partition: 0, Dialer: c.dialer(),
		MaxWait: 100 * time.Millisecond, MaxBytes: 16 << 20})
	defer r.Close()
	if err := r.SetOffset(first); err != nil {
		return fromBrokers(err)
	}
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return fromBrokers(err)
		}
		if err := fn(m); err != nil {
			return err
		}
		if m.Offset+1 >= last {
			return nil
		}
	}
}

// partitionBounds are a partition's first and next offsets.
func partitionBounds(ctx context.Context, c Client, topic string, partition int) (first, last int64, err error) {
	a := c.admin()
	defer closeClient(a)
	res, err := a.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{
		topic: {kafkago.FirstOffsetOf(partition), kafkago.LastOffsetOf(partition)}}})
	if err != nil {
		return 0, 0, fromBrokers(err)
	}
	for _, p := range res.Topics[topic] {
		if p.Partition == partition {
			if p.Error != nil {
				return 0, 0, fromBrokers(p.Error)
			}
			return p.FirstOffset, p.LastOffset, nil
		}
	}
	return 0, 0, fromBrokers(fmt.Errorf("kafka: partition %d of %s not found", partition, topic))
}

// parseLSN reads PostgreSQL's text of an LSN ("16/B374D848"); 0 when it
// is not one.
func parseLSN(s string) uint64 {
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0
	}
	return h<<32 | l
}
