package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

var (
	_ loader.Sink            = (*Sink)(nil)
	_ loader.SnapshotStore   = (*Sink)(nil)
	_ loader.TableStateStore = (*Sink)(nil)
)

// Config says where and how the publisher writes. The zero value of every
// field but Client.Brokers means its default.
type Config struct {
	Client
	// Database is the PostgreSQL database's name, for the envelope's
	// source.db. Default "".
	Database string
	// Partitions of each table topic ferry creates. Default 1. Topics
	// that exist are used as they are.
	Partitions int
	// ReplicationFactor of the topics ferry creates. Default 1 (right for
	// a test broker; use 3 on a production cluster).
	ReplicationFactor int
	// BatchBytes bounds the messages of one partition's record batch,
	// which must fit in the broker's message.max.bytes (the topic's
	// max.message.bytes); a row's message must fit in it too. Default
	// 960 KiB, under Kafka's default of 1 MiB. Above it, the table topics
	// ferry creates get max.message.bytes = BatchBytes + 64 KiB; raise a
	// topic that exists, and the loaders' FetchMaxBytes, yourself.
	// ferry run --kafka-max-message-bytes.
	BatchBytes int64
	// BatchTimeout is how long the producer waits to fill a batch before
	// sending it. Write sends whole batches of rows at once, so this only
	// delays the last request of each. Default 2ms (kafka-go's is 1s,
	// which would hold a quiet stream back).
	BatchTimeout time.Duration
	// OmitTombstones stops the publisher from following every delete with
	// a tombstone (the row's key with a null value), which lets log
	// compaction forget a deleted row. Default false: tombstones are sent.
	OmitTombstones bool
	// Clock is read for envelope times and truncation ids. Default: time.Now.
	Clock func() time.Time
	// Format is how events are written: Debezium's defaults when zero.
	Format Format
}

// Sink publishes batches of rows as Debezium envelopes, one topic per
// table, and keeps the replicator's snapshot and table states on the
// state topic. Its methods are called from one goroutine.
type Sink struct {
	cfg    Config
	log    *zap.Logger
	admin  *kafkago.Client
	writer *kafkago.Writer
	tables map[*schema.TableMap]*table
	topics map[string]bool   // topics known to exist
	shown  map[string]bool   // schema ids published by this process
	state  map[string][]byte // the state topic, read on first use
	parts  map[string]int    // partitions by topic, as pinned (see partitions.go)
	bal    *balancer
	// created are the table topics this process made, with their
	// partition counts, until pinned.
	created map[string]int
	// maxVersion is the highest version written so far, a truncation's
	// source.lsn (informative: loaders go by HeaderTruncate).
	maxVersion   uint64
	lastTruncate int64
	// copied is, by topic, when the last copy into it began (µs; the
	// truncation a copy starts with), its rows' source.ts_ms; first, the
	// topics whose copy has sent no row yet.
	copied map[string]int64
	first  map[string]bool
	// snapshotLSN is the slot's snapshot LSN, once set or read (source.lsn
	// of the initial copy's rows).
	snapshotLSN uint64
	// renamed holds the ClickHouse names of tables renamed since their
	// last copy: see RenameTable.
	renamed map[string]bool
	closed  bool
	// initial is set while the initial snapshot is copied (its state set,
	// not yet done); held is its latest row, published with the next
	// batch or, when the snapshot is done, as its last (source.snapshot
	// "last"). See releaseHeld.
	initial bool
	held    *heldRow
}

// heldRow is a row of the initial snapshot not yet published, encoded
// both ways (the replicator reuses a batch's values once Write returns).
type heldRow struct {
	t          *table
	msg, asEnd kafkago.Message
}

// New returns a publisher; it connects on first use.
func New(cfg Config) (*Sink, error) {
	var err error
	if cfg.Client, err = cfg.Client.withDefaults(); err != nil {
		return nil, err
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 1
	}
	if cfg.ReplicationFactor <= 0 {
		cfg.ReplicationFactor = 1
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = defaultBatchBytes
	}
	if cfg.BatchTimeout <= 0 {
		cfg.BatchTimeout = 2 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Format, err = cfg.Format.withDefaults(); err != nil {
		return nil, err
	}
	// One transport for the admin client and the writer: creating a topic
	// refreshes the transport's metadata cache, so the writer sees it.
	tr := cfg.transport()
	bal := &balancer{pinned: map[string]int{}}
	w := &kafkago.Writer{
		Addr:         kafkago.TCP(cfg.Brokers...),
		Balancer:     bal,
		RequiredAcks: kafkago.RequireAll,
		BatchSize:    10000,
		BatchBytes:   cfg.BatchBytes,
		BatchTimeout: cfg.BatchTimeout,
		MaxAttempts:  5,
		WriteTimeout: 30 * time.Second,
		Transport:    tr,
	}
	admin := &kafkago.Client{Addr: w.Addr, Transport: tr, Timeout: 30 * time.Second}
	return &Sink{cfg: cfg, log: cfg.Logger, admin: admin, writer: w, bal: bal,
		tables: map[*schema.TableMap]*table{}, parts: map[string]int{}, topics: map[string]bool{}, shown: map[string]bool{},
		copied: map[string]int64{}, first: map[string]bool{}, renamed: map[string]bool{}, created: map[string]int{}}, nil
}

// Capabilities are the wire capabilities: the publisher is handed values
// converted for the oldest ClickHouse ferry supports, whose integer forms of
// dates, timestamps and booleans hold every PostgreSQL value, so what it
// publishes depends on no ClickHouse. Pass them to replicator.New.
func (s *Sink) Capabilities() schema.Capabilities { return schema.Capabilities{} }

// Prepare creates the state, schema and table topics that are missing and
// publishes the tables' descriptions.
func (s *Sink) Prepare(ctx context.Context, tables []*schema.TableMap) error {
	if err := s.ensureTopic(ctx, s.cfg.StateTopic(), 1, true); err != nil {
		return err
	}
	if err := s.ensureTopic(ctx, s.cfg.SchemaTopic(), 1, true); err != nil {
		return err
	}
	for _, tm := range tables {
		if _, err := s.table(ctx, tm); err != nil {
			return err
		}
	}
	return nil
}

// table returns the topic of a mapping, creating it and publishing the
// mapping's description first when needed. A rebuild's shadow mapping
// (another ClickHouse name, the same PostgreSQL table) goes to the table's
// own topic: the loader learns of the rebuild from the truncation that
// starts the copy (see SwapTable).
func (s *Sink) table(ctx context.Context, tm *schema.TableMap) (*table, error) {
	if t := s.tables[tm]; t != nil {
		return t, nil
	}
	if tm.Caps != (schema.Capabilities{}) {
		return nil, fmt.Errorf("%w: table %s is mapped for a ClickHouse server's capabilities; "+
			"the Kafka publisher takes rows converted with the wire capabilities (Sink.Capabilities)", errEncoding, tm.Source.QualifiedName())
	}
	t, err := newTable(s.cfg.TopicPrefix, tm.Source, schema.Capabilities{})
	if err != nil {
		return nil, err
	}
	t.tm = tm
	if err := s.ensureTopic(ctx, t.topic, s.cfg.Partitions, false); err != nil {
		return nil, err
	}
	if _, err := s.partitions(ctx, t.topic); err != nil { // pinned before any row goes out
		return nil, err
	}
	if !s.shown[t.schemaID] {
		msg, err := schemaValue(s.cfg.SchemaTopic(), t)
		if err != nil {
			return nil, err
		}
		if err := s.write(ctx, msg); err != nil {
			return nil, fmt.Errorf("kafka: publish the description of %s: %w", tm.Source.QualifiedName(), err)
		}
		s.shown[t.schemaID] = true
		s.log.Info("published table description", zap.String("table", tm.Source.QualifiedName()),
			zap.String("topic", t.topic), zap.String("schema", t.schemaID))
	}
	s.tables[tm] = t
	return t, nil
}

// Write publishes the batch and returns once every broker in sync has
// every message (acks=all), but for the initial snapshot's latest row,
// which it holds back (see releaseHeld).
func (s *Sink) Write(ctx context.Context, b *loader.Batch) error {
	if b == nil || len(b.Rows) == 0 {
		return nil
	}
	t, err := s.table(ctx, b.Table)
	if err != nil {
		return err
	}
	now := time.Now().UnixMicro()
	st := stamp{prefix: s.cfg.TopicPrefix, db: s.cfg.Database, now: now, copied: now, format: s.cfg.Format, snapshotLSN: s.snapshotLSN}
	if c, ok := s.copied[t.topic]; ok {
		st.copied = c
	}
	rows := b.Rows
	if !s.cfg.Format.legacy {
		rows = foldFullRowUpdates(t, rows)
	}
	var msgs []kafkago.Message
	if s.held != nil {
		msgs = append(msgs, s.held.msg)
	}
	// The initial snapshot's latest row waits for the next batch: the
	// last one of all goes out when the snapshot is done, marked so.
	var hold *heldRow
	if last := rows[len(rows)-1]; s.initial && !s.cfg.Format.legacy && last.TxID == 0 && !last.Deleted {
		hold = &heldRow{t: t}
	}
	rowMsgs := make([]kafkago.Message, len(rows))
	top := s.maxVersion
	for i, r := range rows {
		st.first = r.TxID == 0 && s.first[t.topic]
		if rowMsgs[i], err = t.message(st, r); err != nil {
			return err
		}
		if hold != nil && i == len(rows)-1 {
			hold.msg, hold.asEnd = rowMsgs[i], rowMsgs[i]
			if !st.first {
				end := st
				end.last = true
				if hold.asEnd, err = t.message(end, r); err != nil {
					return err
				}
			}
		}
		if st.first {
			delete(s.first, t.topic)
		}
		top = max(top, r.Version)
	}
	linkKeyChanges(t, rows, rowMsgs)
	if hold != nil {
		rows, rowMsgs = rows[:len(rows)-1], rowMsgs[:len(rowMsgs)-1]
	}
	for i, m := range rowMsgs {
		msgs = append(msgs, m)
		if rows[i].Deleted && m.Key != nil && !s.cfg.OmitTombstones {
			msgs = append(msgs, kafkago.Message{Topic: t.topic, Key: m.Key})
		}
	}
	if len(msgs) > 0 {
		if err := s.write(ctx, msgs...); err != nil {
			return s.explainTooLarge(err, b.Table, t.topic, len(b.Rows))
		}
	}
	s.held = hold
	s.maxVersion = top
	s.log.Debug("published batch", zap.String("topic", t.topic), zap.Int("rows", len(msgs)))
	return nil
}

// linkKeyChanges marks the messages of updates that changed a row's key.
// The replicator hands such an update over as the old key's deleted row
// followed by the new row, both with the change's version (no two changes
// share one); their messages go to the partitions of their keys, so each
// names the other's key: HeaderNewKey on the delete, HeaderOldKey on the
// new row. When the new row has unchanged (TOASTed) values, the delete
// names their columns too (HeaderUnchanged): a loader carries the old
// key's values over to the new key; see the package documentation.
func linkKeyChanges(t *table, rows []loader.Row, msgs []kafkago.Message) {
	if t.tm.Source.FullRow || len(t.tm.Key) == 0 {
		return
	}
	for i := 1; i < len(rows); i++ {
		gone, row := &rows[i-1], &rows[i]
		if !gone.Deleted || row.Deleted || gone.Version != row.Version || bytes.Equal(msgs[i-1].Key, msgs[i].Key) {
			continue
		}
		msgs[i-1].Headers = append(msgs[i-1].Headers, kafkago.Header{Key: HeaderNewKey, Value: msgs[i].Key})
		if u := header(msgs[i], HeaderUnchanged); u != nil {
			msgs[i-1].Headers = append(msgs[i-1].Headers, kafkago.Header{Key: HeaderUnchanged, Value: u})
		}
		msgs[i].Headers = append(msgs[i].Headers, kafkago.Header{Key: HeaderOldKey, Value: msgs[i-1].Key})
		if header(msgs[i], HeaderFormat) != nil { // Debezium's form: the new row is a create
			msgs[i-1].Headers = append(msgs[i-1].Headers, kafkago.Header{Key: DebeziumNewKey, Value: msgs[i].Key})
			msgs[i].Headers = append(msgs[i].Headers, kafkago.Header{Key: DebeziumOldKey, Value: msgs[i-1].Key})
			setOp(&msgs[i], opCreate)
		}
	}
}

// foldFullRowUpdates leaves out the old row's delete that the replicator
// hands over before an update of a FullRow table (see updateFullRow): in
// Debezium's form the update's event carries the old row in "before", and
// the loader deletes its row key from there.
func foldFullRowUpdates(t *table, rows []loader.Row) []loader.Row {
	if !t.tm.Source.FullRow {
		return rows
	}
	out := rows[:0:0]
	for i, r := range rows {
		if r.Deleted && r.Old == nil && i+1 < len(rows) {
			next := rows[i+1]
			if !next.Deleted && next.Old != nil && next.Version == r.Version {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// setOp rewrites the op of an encoded event (its payload, with
// --kafka-schemas) from "u" to op.
func setOp(m *kafkago.Message, op string) {
	m.Value = bytes.Replace(m.Value, []byte(`"op":"u"`), []byte(`"op":"`+op+`"`), 1)
}

// Truncate publishes a 't' message to every partition of the table's
// topic, all with one truncation id (HeaderTruncate, growing with every
// truncation). Each partition is ordered, so a loader knows, for every row,
// whether it came before or after the truncation in its partition. A copy
// starts with a truncation: the message carries the description the copy's
// rows follow, so a loader whose table has another one replaces it (a
// rebuild) instead of altering it.
func (s *Sink) Truncate(ctx context.Context, tm *schema.TableMap) error {
	t, err := s.table(ctx, tm)
	if err != nil {
		return err
	}
	if err := s.marker(ctx, t, s.cfg.Format.TruncateEvents, nil); err != nil {
		return fmt.Errorf("kafka: publish the truncation of %s: %w", tm.Source.QualifiedName(), err)
	}
	s.copied[t.topic] = time.Now().UnixMicro()
	delete(s.renamed, realName(tm))
	return nil
}

// StartCopy is Truncate before a copy of the table: its truncation is
// always a control record (no 't' event), and the copy's first row says
// snapshot "first".
func (s *Sink) StartCopy(ctx context.Context, tm *schema.TableMap) error {
	t, err := s.table(ctx, tm)
	if err != nil {
		return err
	}
	if err := s.marker(ctx, t, false, nil); err != nil {
		return fmt.Errorf("kafka: publish the truncation of %s: %w", tm.Source.QualifiedName(), err)
	}
	s.copied[t.topic] = time.Now().UnixMicro()
	s.first[t.topic] = true
	delete(s.renamed, realName(tm))
	return nil
}

// marker publishes a truncation on every partition of t's topic, with
// extra headers: as Debezium's 't' event when asEvent, else (in the
// Debezium-compatible form) as a control record, a null value with the
// ferry.truncate header, which Debezium's consumers skip as a tombstone.
// Both carry HeaderTruncate, by which a loader applies them.
func (s *Sink) marker(ctx context.Context, t *table, asEvent bool, extra []kafkago.Header) error {
	// A held row goes before any truncation, which may be its table's.
	if err := s.releaseHeld(ctx, false); err != nil {
		return err
	}
	n, err := s.partitions(ctx, t.topic)
	if err != nil {
		return err
	}
	now := s.cfg.Clock()
	id, err := s.nextTruncation(ctx, now)
	if err != nil {
		return err
	}
	value, err := s.truncation(t, now, asEvent)
	if err != nil {
		return err
	}
	msgs := make([]kafkago.Message, n)
	for i := range msgs {
		msgs[i] = kafkago.Message{Topic: t.topic, Value: value, Headers: append([]kafkago.Header{
			{Key: HeaderSchema, Value: []byte(t.schemaID)},
			{Key: HeaderTruncate, Value: fmt.Appendf(nil, "%d:%d:%d", id, i, n)}}, extra...)}
		if !s.cfg.Format.legacy {
			msgs[i].Headers = append(msgs[i].Headers, kafkago.Header{Key: HeaderFormat, Value: s.cfg.Format.codec().header()},
				kafkago.Header{Key: HeaderVersion, Value: strconv.AppendUint(nil, s.maxVersion, 10)})
		}
	}
	return s.write(ctx, msgs...)
}

// truncation is a truncation message's value: nil for a control record.
func (s *Sink) truncation(t *table, now time.Time, asEvent bool) ([]byte, error) {
	src := t.tm.Source
	if s.cfg.Format.legacy {
		env := envelope{Before: nullJSON, After: nullJSON, Op: opTruncate, TsMs: now.UnixMilli(),
			Source: sourceInfo{Connector: "ferry", Name: s.cfg.TopicPrefix, DB: s.cfg.Database, Schema: src.Schema,
				Table: src.Name, LSN: versionNumber(s.maxVersion), TsMs: now.UnixMilli(), Snapshot: "false"}}
		m, err := jsonMessage(t.topic, nil, env)
		return m.Value, err
	}
	if !asEvent {
		return nil, nil
	}
	lsn := int64(s.maxVersion)
	ev := event{Before: nullJSON, After: nullJSON, Transaction: nullJSON, Op: opTruncate,
		Source: source{Version: s.cfg.Format.Version, Connector: "postgresql", Name: s.cfg.TopicPrefix, DB: s.cfg.Database,
			Schema: src.Schema, Table: src.Name, Snapshot: "false", LSN: &lsn}}
	ev.TsMs, ev.TsUs, ev.TsNs = timestamps(now.UnixMicro())
	ev.Source.TsMs, ev.Source.TsUs, ev.Source.TsNs = ev.TsMs, ev.TsUs, ev.TsNs
	value, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errEncoding, err)
	}
	if s.cfg.Format.Schemas {
		value = t.connectValue(stamp{format: s.cfg.Format}, value)
	}
	return value, nil
}

// write produces messages synchronously: it returns when all are acked.
func (s *Sink) write(ctx context.Context, msgs ...kafkago.Message) error {
	err := s.writer.WriteMessages(ctx, msgs...)
	var we kafkago.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil {
				return fromBrokers(e)
			}
		}
	}
	return fromBrokers(err)
}

// Close flushes nothing (Write does not return before its messages are
// acked; a row held back belongs to an initial snapshot not done, which
// the next start copies again) and releases the connections.
func (s *Sink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	defer closeClient(s.admin) // the writer's transport too: the writer closes only one it made
	return s.writer.Close()
}

// ensureTopic creates a topic when it does not exist.
func (s *Sink) ensureTopic(ctx context.Context, topic string, partitions int, compacted bool) error {
	if s.topics[topic] {
		return nil
	}
	tc := kafkago.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: s.cfg.ReplicationFactor}
	if compacted {
		tc.ConfigEntries = []kafkago.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}
	} else if s.cfg.BatchBytes > defaultBatchBytes {
		// Only when raised: a cluster's policy may refuse topic configs,
		// and the default needs none.
		tc.ConfigEntries = []kafkago.ConfigEntry{{ConfigName: "max.message.bytes",
			ConfigValue: strconv.FormatInt(s.cfg.BatchBytes+batchOverhead, 10)}}
	}
	res, err := s.admin.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{tc}})
	if err != nil {
		return fromBrokers(fmt.Errorf("kafka: create topic %s on %v: %w", topic, s.cfg.Brokers, err))
	}
	if err := res.Errors[topic]; err != nil && !errors.Is(err, kafkago.TopicAlreadyExists) {
		return fromBrokers(fmt.Errorf("kafka: create topic %s: %w", topic, err))
	}
	if res.Errors[topic] == nil {
		s.log.Info("created topic", zap.String("topic", topic), zap.Int("partitions", partitions))
		if !compacted {
			s.created[topic] = partitions
		}
	}
	s.topics[topic] = true
	return nil
}

// nextTruncation returns a truncation id above every one published before
// with this topic prefix: a loader takes a truncation whose id is not above
// the last it applied for one it applied already, so an id from a clock
// stepped back across a restart would leave the table's rows in place. The
// last id is kept on the state topic, written before the truncation is
// published; the clock only keeps ids readable as times.
func (s *Sink) nextTruncation(ctx context.Context, now time.Time) (int64, error) {
	st, err := s.states(ctx)
	if err != nil {
		return 0, err
	}
	if raw := st[truncationKey(s.cfg.TopicPrefix)]; raw != nil {
		stored, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("kafka: read the last truncation id on %s: %w", s.cfg.StateTopic(), err)
		}
		s.lastTruncate = max(s.lastTruncate, stored)
	}
	id := max(now.UnixNano(), s.lastTruncate+1)
	if err := s.setState(ctx, truncationKey(s.cfg.TopicPrefix), strconv.AppendInt(nil, id, 10)); err != nil {
		return 0, err
	}
	s.lastTruncate = id
	return id, nil
}
