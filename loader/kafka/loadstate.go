package kafka

import (
	"context"
	"encoding/json"
	"fmt"
)

// tableSlot is the key the destination keeps the description a topic's
// ClickHouse table was last made to match under (its TableStateStore's
// slot, oid 0), so that a loader started again knows which of the
// descriptions it meets are older than its table.
func tableSlot(topic string) string { return "kafka-table:" + topic }

// tableRecord is what tableSlot holds.
type tableRecord struct {
	Schema  string `json:"schema"`
	Since   uint64 `json:"since"`
	Dropped bool   `json:"dropped,omitempty"`
}

// current returns the topic's mapping: the one this loader set, else the
// one recorded in the destination when its table still matches it, else
// nil.
func (l *Loader) current(ctx context.Context, topic string) (*loadTable, error) {
	if t, ok := l.tables[topic]; ok || l.store == nil {
		return t, nil
	}
	l.tables[topic] = nil // read once
	states, err := l.store.TableStates(ctx, tableSlot(topic))
	if err != nil {
		return nil, fmt.Errorf("read the recorded description of %s: %w", topic, err)
	}
	raw := states[0]
	if raw == nil {
		return nil, nil
	}
	var rec tableRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("read the recorded description of %s: %w", topic, err)
	}
	src, err := l.schema(ctx, rec.Schema)
	if err != nil {
		return nil, err
	}
	t, err := l.newTable(src)
	if err != nil {
		return nil, err
	}
	cur := &loadTable{table: t, since: rec.Since, dropped: rec.Dropped}
	if !cur.dropped {
		exists, matches, err := l.dest.Matches(ctx, t.tm)
		if err != nil || !exists || !matches {
			return nil, err // changed behind the loader's back: start afresh
		}
	}
	l.tables[topic] = cur
	return cur, nil
}

// setTable makes next the topic's mapping and records it in the
// destination; the table already matches it.
func (l *Loader) setTable(ctx context.Context, topic string, next *loadTable) error {
	l.tables[topic] = next
	if l.store == nil {
		return nil
	}
	raw, err := json.Marshal(tableRecord{Schema: next.schemaID, Since: next.since, Dropped: next.dropped})
	if err != nil {
		return err
	}
	if err := l.store.SetTableState(ctx, tableSlot(topic), 0, raw); err != nil {
		return fmt.Errorf("record the description of %s: %w", topic, err)
	}
	return nil
}
