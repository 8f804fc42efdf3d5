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
// TableStateStore's slot): oid 0 holds the truncation, oid p+1 the offset
// of its message on partition p, so that the loaders of a group, each
// owning some partitions, never write the same record but for the first.
// PostgreSQL slot names cannot hold ':', so it never meets a replication
// slot's states.
func cutSlot(topic string) string { return "kafka-truncation:" + topic }

// cutRecord is one record of a cut.
type cutRecord struct {
	ID         int64 `json:"id"`
	Offset     int64 `json:"offset,omitempty"`
	Partitions int   `json:"partitions,omitempty"`
}

// cutFor returns the topic's last truncation, read from the destination on
// first use; nil when there was none.
func (l *Loader) cutFor(ctx context.Context, topic string) (*cut, error) {
	if c, ok := l.cuts[topic]; ok {
		return c, nil
	}
	c, err := l.readCut(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("read the last truncation of %s: %w", topic, err)
	}
	l.cuts[topic] = c
	return c, nil
}

func (l *Loader) readCut(ctx context.Context, topic string) (*cut, error) {
	if l.store == nil {
		return nil, nil
	}
	states, err := l.store.TableStates(ctx, cutSlot(topic))
	if err != nil || states[0] == nil {
		return nil, err
	}
	recs := map[uint32]cutRecord{}
	for oid, raw := range states {
		var rec cutRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, err
		}
		recs[oid] = rec
	}
	c := &cut{ID: recs[0].ID, Partitions: recs[0].Partitions, Markers: map[int]int64{}}
	for oid, rec := range recs {
		if oid > 0 && rec.ID == c.ID {
			c.Markers[int(oid-1)] = rec.Offset
		}
	}
	return c, nil
}

// applied records, durably, that the loader applied a truncation, whose
// message it read on one partition.
func (l *Loader) applied(ctx context.Context, topic string, c *cut, partition int) error {
	l.cuts[topic] = c
	if err := l.saveRecord(ctx, topic, 0, cutRecord{ID: c.ID, Partitions: c.Partitions}); err != nil {
		return err
	}
	return l.reached(ctx, topic, c, partition)
}

// reached records, durably, that a partition delivered the truncation c.
func (l *Loader) reached(ctx context.Context, topic string, c *cut, partition int) error {
	return l.saveRecord(ctx, topic, uint32(partition)+1, cutRecord{ID: c.ID, Offset: c.Markers[partition]})
}

func (l *Loader) saveRecord(ctx context.Context, topic string, oid uint32, rec cutRecord) error {
	if l.store == nil {
		return nil
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := l.store.SetTableState(ctx, cutSlot(topic), oid, raw); err != nil {
		return fmt.Errorf("record the truncation of %s: %w", topic, err)
	}
	return nil
}
