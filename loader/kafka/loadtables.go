package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// loadTable is the mapping of one topic's table.
type loadTable struct {
	*table
	// since is the lowest version a row of another description must have
	// to be newer than this one: the version of the row (or truncation)
	// that brought it. Every row of an older description has a lower
	// version, so a row read late, from a partition behind the others, is
	// converted into this mapping instead of turning the table back.
	since   uint64
	dropped bool // the last truncation dropped the table (renamed away)
}

// handle takes in one message.
func (l *Loader) handle(ctx context.Context, r *kafkago.Reader, m kafkago.Message) error {
	if l.held(m) {
		return nil
	}
	// A truncation, as an event or (value null) a control record: looked
	// for before tombstones, which a control record looks like.
	if header(m, HeaderTruncate) != nil {
		return l.truncate(ctx, r, m)
	}
	if m.Value == nil {
		// A tombstone (after a delete, for log compaction): the delete
		// before it did the work.
		l.pending = append(l.pending, m)
		return nil
	}
	c, err := l.cutFor(ctx, m.Topic)
	if err != nil {
		return err
	}
	if c.behind(m) {
		// Published before the last truncation, on a partition read
		// behind the one that brought it.
		l.pending = append(l.pending, m)
		return nil
	}
	t, d, err := l.decode(ctx, r, m)
	if err != nil {
		return err
	}
	if parked, err := l.park(ctx, m, t, d); err != nil || parked {
		return err
	}
	l.pending = append(l.pending, m)
	if d.carrier != nil { // just before the delete: see movedFrom in loader/clickhouse
		l.batch.Add(t.tm, *d.carrier, 0)
		l.queuedCarrier(m.Topic, header(m, HeaderNewKey), d.row.Version)
	}
	if d.gone != nil {
		l.batch.Add(t.tm, *d.gone, 0)
	}
	l.batch.Add(t.tm, d.row, len(m.Value))
	return nil
}

// decode reads a row message into the mapping of its topic's table,
// creating or altering the ClickHouse table when the message brings a newer
// description.
func (l *Loader) decode(ctx context.Context, r *kafkago.Reader, m kafkago.Message) (*loadTable, decoded, error) {
	id := string(header(m, HeaderSchema))
	if id == "" {
		return nil, decoded{}, fmt.Errorf("no %s header: not a ferry change message", HeaderSchema)
	}
	cur, err := l.current(ctx, m.Topic)
	if err != nil {
		return nil, decoded{}, err
	}
	if cur != nil && !cur.dropped && cur.schemaID == id {
		d, err := cur.decode(m)
		return cur, d, err
	}
	src, err := l.schema(ctx, id)
	if err != nil {
		return nil, decoded{}, err
	}
	t, err := l.newTable(src)
	if err != nil {
		return nil, decoded{}, err
	}
	d, err := t.decode(m)
	if err != nil {
		return nil, decoded{}, err
	}
	if cur != nil && !cur.dropped && d.row.Version < cur.since {
		d, err = lateReader(cur.table, t).decode(m)
		return cur, d, err
	}
	// The rows read so far were of the old shape: write them first.
	if err := l.flush(ctx, r); err != nil {
		return nil, decoded{}, err
	}
	next := &loadTable{table: t, since: d.row.Version}
	if cur == nil || cur.dropped {
		err = l.prepare(ctx, t.tm)
	} else {
		err = l.alter(ctx, cur.tm, t.tm)
	}
	if err != nil {
		return nil, decoded{}, err
	}
	if err := l.setTable(ctx, m.Topic, next); err != nil {
		return nil, decoded{}, err
	}
	return next, d, nil
}

// lateReader reads messages of description t, older than cur's, into
// cur's mapping, by column name: a column t does not have (added in place
// since, so nullable) gets its zero value, NULL; one cur does not have
// (dropped since) is left out.
func lateReader(cur, t *table) *table {
	wire := make([]column, len(cur.tm.Columns))
	for i, cm := range cur.tm.Columns {
		wire[i] = column{name: cm.Name, missing: true}
		for _, c := range t.wire {
			if c.name == cm.Name {
				wire[i] = c
			}
		}
	}
	return &table{topic: cur.topic, schemaID: t.schemaID, tm: cur.tm, wire: wire}
}

// truncate handles one of a truncation's messages. The first one read
// empties the table, replacing it when the truncation brings another
// description (a rebuild: the copy's rows follow), or drops it when the
// table was renamed away; a partition read behind delivers its message
// later, and its rows until then are dropped.
func (l *Loader) truncate(ctx context.Context, r *kafkago.Reader, m kafkago.Message) error {
	id, partitions, err := truncation(m)
	if err != nil {
		return err
	}
	c, err := l.cutFor(ctx, m.Topic)
	if err != nil {
		return err
	}
	if c != nil && id <= c.ID {
		return l.reach(ctx, m, c, id)
	}
	next, err := l.truncatedTable(ctx, m)
	if err != nil {
		return err
	}
	if err := l.flush(ctx, r); err != nil {
		return err
	}
	// Another loader of the group, reading another partition, may have
	// applied it since this one read the destination's record.
	if c, err = l.readCut(ctx, m.Topic); err != nil {
		return err
	}
	if c != nil && id <= c.ID {
		l.cuts[m.Topic] = c
		if id == c.ID {
			l.tables[m.Topic] = next // the other loader recorded it
		}
		return l.reach(ctx, m, c, id)
	}
	if to := header(m, HeaderDrop); to != nil {
		err = l.dest.DropTable(ctx, next.tm.Name)
		l.log.Info("table renamed: dropped its ClickHouse table; its new topic brings a copy",
			zap.String("table", next.tm.Name), zap.String("new_topic", string(to)))
	} else {
		err = l.empty(ctx, next.tm)
	}
	if err != nil {
		return err
	}
	// Recorded before its offset is committed: a loader started after a
	// crash does not apply it again when a partition behind delivers it.
	c = &cut{ID: id, Markers: map[int]int64{m.Partition: m.Offset}, Partitions: partitions}
	if err := l.applied(ctx, m.Topic, c, m.Partition); err != nil {
		return err
	}
	if err := l.setTable(ctx, m.Topic, next); err != nil {
		return err
	}
	// Its offset is committed only once the table is empty.
	l.pending = append(l.pending, m)
	return l.commit(ctx, r)
}

// truncation reads a truncation message's id and partition count (0 when
// the header has none).
func truncation(m kafkago.Message) (id int64, partitions int, err error) {
	h := string(header(m, HeaderTruncate))
	fields := strings.Split(h, ":")
	if id, err = strconv.ParseInt(fields[0], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("header %s %q: %w", HeaderTruncate, h, err)
	}
	if len(fields) > 2 {
		partitions, _ = strconv.Atoi(fields[2])
	}
	return id, partitions, nil
}

// reach takes in a message of a truncation already applied (or older).
func (l *Loader) reach(ctx context.Context, m kafkago.Message, c *cut, id int64) error {
	if _, ok := c.Markers[m.Partition]; id == c.ID && !ok {
		// Recorded before the offsets of the rows skipped until here
		// are committed.
		c.Markers[m.Partition] = m.Offset
		if err := l.reached(ctx, m.Topic, c, m.Partition); err != nil {
			return err
		}
	}
	l.pending = append(l.pending, m)
	return nil
}

// truncatedTable is the mapping of a topic after a truncation message.
func (l *Loader) truncatedTable(ctx context.Context, m kafkago.Message) (*loadTable, error) {
	src, err := l.schema(ctx, string(header(m, HeaderSchema)))
	if err != nil {
		return nil, err
	}
	t, err := l.newTable(src)
	if err != nil {
		return nil, err
	}
	d, err := t.decode(m)
	if err != nil {
		return nil, err
	}
	next := &loadTable{table: t, since: d.row.Version + 1, dropped: header(m, HeaderDrop) != nil}
	cur, err := l.current(ctx, m.Topic)
	if cur != nil {
		next.since = max(next.since, cur.since)
	}
	return next, err
}

// empty leaves an empty table of the mapping tm: truncated when the table
// has its columns, replaced when it has others, created when missing.
func (l *Loader) empty(ctx context.Context, tm *schema.TableMap) error {
	exists, matches, err := l.dest.Matches(ctx, tm)
	switch {
	case err != nil:
		return err
	case !exists:
		return l.dest.Prepare(ctx, []*schema.TableMap{tm})
	case !matches:
		l.log.Info("the table is copied anew with other columns: replacing it", zap.String("table", tm.Name))
		return l.dest.Replace(ctx, tm)
	}
	if err := l.dest.Truncate(ctx, tm); err != nil {
		return err
	}
	l.log.Info("truncated", zap.String("table", tm.Name))
	return nil
}

// prepare creates a table met for the first time, or checks it.
func (l *Loader) prepare(ctx context.Context, tm *schema.TableMap) error {
	exists, matches, err := l.dest.Matches(ctx, tm)
	switch {
	case err != nil:
		return err
	case exists && !matches:
		return fmt.Errorf("the ClickHouse table %s does not have the columns of the description the messages refer to "+
			"(a schema change the loader applied before a restart?); drop it and reset the group's offsets to reload", tm.Name)
	}
	return l.dest.Prepare(ctx, []*schema.TableMap{tm})
}

// alter applies a new description in place, as the direct path does.
// Changes that need a rebuild come with a copy (a truncation carrying the
// new description), never as a bare description.
func (l *Loader) alter(ctx context.Context, from, to *schema.TableMap) error {
	if !schema.SameKey(from, to) {
		return fmt.Errorf("table %s: %w", to.Source.QualifiedName(), errRebuild)
	}
	changes := schema.Diff(from, to, nil)
	for _, c := range changes {
		if !schema.InPlace(c, l.dest.Capabilities()) {
			return fmt.Errorf("table %s: %w", to.Source.QualifiedName(), errRebuild)
		}
	}
	if len(changes) == 0 {
		return nil
	}
	l.log.Info("altering table", zap.String("table", to.Name), zap.Int("changes", len(changes)))
	return l.dest.AlterTable(ctx, to, changes)
}

// schema returns a table description by id, reading the schema topic again
// when the id is new: the publisher writes a description before any row
// that refers to it.
func (l *Loader) schema(ctx context.Context, id string) (schema.Table, error) {
	if t, ok := l.schemas[id]; ok {
		return t, nil
	}
	err := readTopic(ctx, l.cfg.Client, l.cfg.SchemaTopic(), func(m kafkago.Message) error {
		var sm schemaMessage
		if err := json.Unmarshal(m.Value, &sm); err != nil {
			l.log.Warn("ignoring a description ferry cannot read", zap.Int64("offset", m.Offset), zap.Error(err))
			return nil
		}
		l.schemas[sm.ID] = sm.Table
		return nil
	})
	if err != nil {
		return schema.Table{}, fmt.Errorf("read %s: %w", l.cfg.SchemaTopic(), err)
	}
	t, ok := l.schemas[id]
	if !ok {
		return schema.Table{}, fmt.Errorf("table description %s is not on %s", id, l.cfg.SchemaTopic())
	}
	return t, nil
}
