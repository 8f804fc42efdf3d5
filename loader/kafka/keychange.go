package kafka

import (
	"context"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// An update that changes a row's key is published as the old key's delete
// and the new key's row, on the partitions of their keys. When the new row
// has unchanged (TOASTed) values, they are the old key's values before the
// delete, which only the old key's partition, read in order up to the
// delete, can tell. So the delete brings a carrier (see carrierRow), and
// the new row waits for it: its partition is parked, its messages from the
// new row on held back and not committed, until the carrier is queued by
// this loader or stored by any loader of the group. Each partition is in
// version order and a new row waits only for a carrier of its own version,
// so a carrier never waits on the partition it unblocks.

// keyChangeWait bounds how long a partition stays parked: a carrier that
// does not come in that time means that no loader of the group reads the
// old key's partition.
const keyChangeWait = 10 * time.Minute

// maxCarriers bounds the carriers this loader remembers having queued.
const maxCarriers = 1 << 20

// parking is a partition held back until a carrier is there.
type parking struct {
	msgs    []kafkago.Message // from the new row on
	tm      *schema.TableMap
	key     []any  // the new row's values (its key is looked up)
	version uint64 // the new row's
	id      string // carrierID
	since   time.Time
	checked time.Time // when ClickHouse was last asked
}

// carrierID identifies the carrier for the new row of key (a message key)
// at version in a topic.
func carrierID(topic string, key []byte, version uint64) string {
	return fmt.Sprintf("%s\x00%d\x00%s", topic, version, key)
}

func partitionID(m kafkago.Message) string { return fmt.Sprintf("%s/%d", m.Topic, m.Partition) }

// held holds m back when its partition is parked, and reports whether it
// did.
func (l *Loader) held(m kafkago.Message) bool {
	p := l.parked[partitionID(m)]
	if p != nil {
		p.msgs = append(p.msgs, m)
	}
	return p != nil
}

// park parks m's partition when m is the new row of a key change whose
// carrier is not there yet, and reports whether it did.
//
// Asking ClickHouse costs a query per new row. With one loader the carrier
// is mostly queued by this loader, a little later, so ClickHouse is asked
// only after firstCheck; with several, the carrier is often stored by
// another, so once a carrier was found there ClickHouse is asked at once.
func (l *Loader) park(ctx context.Context, m kafkago.Message, t *loadTable, d decoded) (bool, error) {
	if !d.moved {
		return false, nil
	}
	id := carrierID(m.Topic, m.Key, d.row.Version)
	if l.carriers[id] {
		return false, nil
	}
	p := &parking{msgs: []kafkago.Message{m}, tm: t.tm, key: d.row.Values, version: d.row.Version, id: id, since: time.Now()}
	if l.storedLast {
		if ready, err := l.carrierStored(ctx, p); err != nil || ready {
			return false, err
		}
	} else {
		p.checked = p.since.Add(firstCheck - recheck)
	}
	l.parked[partitionID(m)] = p
	l.log.Debug("a key change waits for its carrier from the old key's partition",
		zap.String("topic", m.Topic), zap.Int("partition", m.Partition), zap.Int64("offset", m.Offset))
	return true, nil
}

// How long a parked partition waits before ClickHouse is first asked for
// its carrier, and then between two questions: less when carriers come
// from other loaders (storedLast). Those loaders, for the same reason,
// write a batch with carriers after carrierFlush rather than MaxAge.
const (
	firstCheck    = 50 * time.Millisecond
	recheck       = 250 * time.Millisecond
	recheckStored = 40 * time.Millisecond
	carrierFlush  = 20 * time.Millisecond
)

// recheckAfter is the time between two questions to ClickHouse.
func (l *Loader) recheckAfter() time.Duration {
	if l.storedLast {
		return recheckStored
	}
	return recheck
}

// carriersDue reports whether the batch holds carriers that other loaders
// may be waiting for long enough.
func (l *Loader) carriersDue() bool {
	return l.storedLast && !l.carrierSince.IsZero() && time.Since(l.carrierSince) >= carrierFlush
}

// carrierStored reports whether p's carrier is stored: the new key's
// latest stored version is the carrier's or later. A stored carrier is
// then remembered as if queued.
func (l *Loader) carrierStored(ctx context.Context, p *parking) (bool, error) {
	p.checked = time.Now()
	v, found, err := l.dest.KeyVersion(ctx, p.tm, p.key)
	if err != nil {
		return false, fmt.Errorf("look up the carrier of a key change in %s: %w", p.tm.Name, err)
	}
	ready := found && v+1 >= p.version
	if ready {
		l.remember(p.id)
	}
	return ready, nil
}

// queuedCarrier records that the carrier for the new row of key at
// version in topic is queued.
func (l *Loader) queuedCarrier(topic string, key []byte, version uint64) {
	l.remember(carrierID(topic, key, version))
	if l.carrierSince.IsZero() {
		l.carrierSince = time.Now()
	}
}

func (l *Loader) remember(id string) {
	if len(l.carriers) >= maxCarriers {
		clear(l.carriers) // those queued before are stored by now, or their batch failed
	}
	l.carriers[id] = true
}

// resume takes in the messages of every parked partition whose carrier is
// there, in order; one may park its partition again. A partition parked
// for keyChangeWait is an error.
func (l *Loader) resume(ctx context.Context, r *kafkago.Reader) error {
	for part, p := range l.parked {
		ready, stored := l.carriers[p.id], false
		if !ready && time.Since(p.checked) > l.recheckAfter() {
			var err error
			if ready, err = l.carrierStored(ctx, p); err != nil {
				return err
			}
			stored = ready
		}
		if ready {
			l.storedLast = stored
		}
		if !ready {
			if time.Since(p.since) > keyChangeWait {
				return fmt.Errorf("kafka: %s: the new row of a key change (key %s, source.lsn %d) has waited %s for the old key's delete, "+
					"which no loader of group %s has read; it carries the unchanged (TOASTed) values: is a loader of the group stuck?",
					part, p.msgs[0].Key, p.version, keyChangeWait, l.cfg.Group)
			}
			continue
		}
		delete(l.parked, part)
		for _, m := range p.msgs {
			if err := l.handle(ctx, r, m); err != nil {
				return fmt.Errorf("kafka: %s partition %d offset %d: %w", m.Topic, m.Partition, m.Offset, err)
			}
		}
	}
	return nil
}
