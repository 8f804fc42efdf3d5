package kafka

import (
	"context"
	"encoding/json"
	"fmt"

	kafkago "github.com/segmentio/kafka-go"
)

// cut is the last truncation a loader applied to a topic's table, kept in
// the destination (loader.TableStateStore) so that a loader started after
// a crash knows it: a truncation's message reaches every partition, and
// the partitions are read at their own pace.
type cut struct {
	// ID is the truncation's id (HeaderTruncate).
	ID int64 `json:"id"`
	// Markers holds, by partition, the offset of the truncation's message
	// on it, for the partitions that delivered it.
	Markers map[int]int64 `json:"markers"`
	// Partitions is how many partitions the topic had when the truncation
	// was published (0: not known); a partition added since has no
	// message of it and none of the rows it removed.
	Partitions int `json:"partitions,omitempty"`
}

// behind reports whether a message came before the truncation on its
// partition: its partition has not delivered the truncation yet, or did so
// at a later offset. Such a row was truncated away.
func (c *cut) behind(m kafkago.Message) bool {
	if c == nil || (c.Partitions > 0 && m.Partition >= c.Partitions) {
		return false
	}
	off, ok := c.Markers[m.Partition]
	return !ok || m.Offset < off
}

// cutSlot is the key the destination keeps a topic's cut under (its
// TableStateStore's slot, with oid 0). PostgreSQL slot names cannot hold
// ':', so it never meets a replication slot's states.
func cutSlot(topic string) string { return "kafka-truncation:" + topic }

// cutFor returns the topic's last truncation, read from the destination on
// first use; nil when there was none.
func (l *Loader) cutFor(ctx context.Context, topic string) (*cut, error) {
	if c, ok := l.cuts[topic]; ok {
		return c, nil
	}
	var c *cut
	if l.store != nil {
		states, err := l.store.TableStates(ctx, cutSlot(topic))
		if err != nil {
			return nil, fmt.Errorf("read the last truncation of %s: %w", topic, err)
		}
		if raw := states[0]; raw != nil {
			c = &cut{}
			if err := json.Unmarshal(raw, c); err != nil {
				return nil, fmt.Errorf("read the last truncation of %s: %w", topic, err)
			}
			if c.Markers == nil {
				c.Markers = map[int]int64{}
			}
		}
	}
	l.cuts[topic] = c
	return c, nil
}

// saveCut records the topic's last truncation durably.
func (l *Loader) saveCut(ctx context.Context, topic string, c *cut) error {
	l.cuts[topic] = c
	if l.store == nil {
		return nil
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := l.store.SetTableState(ctx, cutSlot(topic), 0, raw); err != nil {
		return fmt.Errorf("record the truncation of %s: %w", topic, err)
	}
	return nil
}
