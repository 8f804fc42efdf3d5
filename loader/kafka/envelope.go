package kafka

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// Operations of the envelope's op field, as Debezium names them.
const (
	opRead     = "r" // a row of a copy: the initial snapshot, a table that joined, a rebuild
	opUpdate   = "u" // a streamed row: insert or update (the Row does not tell them apart)
	opDelete   = "d"
	opTruncate = "t"
)

// Headers ferry adds to every change message.
const (
	// HeaderSchema is the id of the table description (on the
	// <prefix>.schema-changes topic) the row's columns follow.
	HeaderSchema = "ferry.schema"
	// HeaderSeq is the row's sequence number, for append-only tables.
	HeaderSeq = "ferry.seq"
	// HeaderUnchanged lists, as a JSON array of names, the columns whose
	// value pgoutput did not send (unchanged TOAST values); in "after"
	// they hold UnavailableValue. On the old key's delete of a key change
	// (with HeaderNewKey) it lists the new row's: their values are the
	// ones the old key had before the delete.
	HeaderUnchanged = "ferry.unchanged"
	// HeaderOldKey is on the new row of an update that changed the row's
	// key: the old key, as the message key of the old key's delete (which
	// is on that key's partition, and carries HeaderNewKey). Debezium
	// calls it __debezium.oldkey.
	HeaderOldKey = "ferry.old-key"
	// HeaderNewKey is on the old key's delete of an update that changed
	// the row's key: the new key, as the message key of the new row.
	// Debezium calls it __debezium.newkey.
	HeaderNewKey = "ferry.new-key"
	// HeaderTruncate is on truncation ('t') messages, one on each
	// partition: "<id>:<partition index>:<partitions>", the id growing
	// with every truncation of the publisher.
	HeaderTruncate = "ferry.truncate"
	// HeaderDrop is on the truncation messages that end a table's topic
	// when the table was renamed: its value is the topic the table moved
	// to. A loader drops its ClickHouse table; the new topic brings a copy.
	HeaderDrop = "ferry.drop"
)

// UnavailableValue stands in "after" for an unchanged TOAST value, as in
// Debezium. Only HeaderUnchanged says which columns it marks, so a text
// that happens to equal it is not mistaken for one.
const UnavailableValue = "__debezium_unavailable_value"

// envelope is Debezium's change event value, without the schema block.
type envelope struct {
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
	Source sourceInfo      `json:"source"`
	Op     string          `json:"op"`
	TsMs   int64           `json:"ts_ms"`
}

// sourceInfo is the envelope's source block.
type sourceInfo struct {
	Connector string `json:"connector"`
	Name      string `json:"name"`
	DB        string `json:"db"`
	Schema    string `json:"schema"`
	Table     string `json:"table"`
	// LSN is the row's version: the WAL position of its change, 0 for
	// the initial copy (ferry's _ferry_version).
	LSN json.Number `json:"lsn"`
	// TxID is the PostgreSQL transaction id (xid) of a streamed change;
	// null for rows of a copy and for truncations.
	TxID *uint32 `json:"txId"`
	// TsMs is the commit time of the change's transaction; for rows of a
	// copy, the time the copy began.
	TsMs     int64  `json:"ts_ms"`
	Snapshot string `json:"snapshot"`
}

// schemaMessage is a value of the <prefix>.schema-changes topic, keyed by
// its id.
type schemaMessage struct {
	ID    string       `json:"id"`
	Topic string       `json:"topic"`
	Table schema.Table `json:"table"`
}

// schemaID identifies a table description: a hash of its JSON.
func schemaID(t schema.Table) (string, []byte, error) {
	doc, err := json.Marshal(t)
	if err != nil {
		return "", nil, fmt.Errorf("%w: describe %s: %v", errEncoding, t.QualifiedName(), err)
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:16]), doc, nil
}

// table is what the publisher and the loader know of one table's topic.
type table struct {
	topic    string
	schemaID string
	tm       *schema.TableMap // the destination's mapping (the wire mapping for the publisher)
	wire     []column
	// connect and connectK are the Connect schemas of values and keys
	// (--kafka-schemas), made on first use.
	connect, connectK []byte
}

func newTable(prefix string, src schema.Table, caps schema.Capabilities) (*table, error) {
	wire, err := schema.Map(src, schema.Capabilities{})
	if err != nil {
		return nil, err
	}
	tm := wire
	if caps != (schema.Capabilities{}) {
		if tm, err = schema.Map(src, caps); err != nil {
			return nil, err
		}
	}
	id, _, err := schemaID(src)
	if err != nil {
		return nil, err
	}
	return &table{topic: TableTopic(prefix, src.Schema, src.Name), schemaID: id, tm: tm, wire: wireColumns(wire)}, nil
}

// stamp is what a message says of where and when it was made.
type stamp struct {
	prefix string // the topic prefix, source.name
	db     string // the PostgreSQL database, source.db
	now    int64  // publishing time (µs), the envelope's ts_ms
	copied int64  // for rows of a copy: the time the copy began (µs)
	format Format
	// snapshotLSN is the initial snapshot's LSN, source.lsn of its rows.
	snapshotLSN uint64
	// first: the row is the first of a table's copy (source.snapshot
	// "first"); last, the last of the initial snapshot ("last").
	first, last bool
}

// message encodes one row. A row without a transaction (TxID 0) comes from
// a copy: the initial snapshot, a table that joined, or a rebuild; it is a
// read ('r'), whatever its version. A streamed row is a create ('c') when
// pgoutput sent an insert, else an update ('u').
func (t *table) message(st stamp, r loader.Row) (kafkago.Message, error) {
	if st.format.legacy {
		return t.legacyMessage(st, r)
	}
	cd := st.format.codec()
	src := t.tm.Source
	ev := event{Op: opUpdate, Transaction: nullJSON, Before: nullJSON, After: nullJSON}
	ev.TsMs, ev.TsUs, ev.TsNs = timestamps(st.now)
	so := source{Version: st.format.Version, Connector: "postgresql", Name: st.prefix, DB: st.db,
		Schema: src.Schema, Table: src.Name, Snapshot: "false"}
	lsn, commit := int64(r.Version), r.CommitMicros
	if r.TxID == 0 {
		ev.Op, so.Snapshot, commit = opRead, "true", st.copied
		switch {
		case st.first:
			so.Snapshot = "first"
		case st.last:
			so.Snapshot = "last"
		}
		if lsn == 0 {
			lsn = int64(st.snapshotLSN)
		}
	} else {
		xid := int64(r.TxID)
		so.TxID = &xid
		seq := fmt.Sprintf(`[null,"%d"]`, lsn)
		so.Sequence = &seq
		if r.Inserted {
			ev.Op = opCreate
		}
	}
	so.LSN = &lsn
	so.TsMs, so.TsUs, so.TsNs = timestamps(commit)
	ev.Source = so
	headers := []kafkago.Header{{Key: HeaderSchema, Value: []byte(t.schemaID)}, {Key: HeaderFormat, Value: cd.header()},
		{Key: HeaderVersion, Value: strconv.AppendUint(nil, r.Version, 10)}}
	if src.AppendOnly {
		headers = append(headers, kafkago.Header{Key: HeaderSeq, Value: strconv.AppendUint(nil, r.Seq, 10)})
	}
	if src.FullRow {
		headers = append(headers, kafkago.Header{Key: HeaderRowKey, Value: []byte(r.RowKey)})
	}
	all := allColumns(len(t.wire))
	var err error
	if r.Old != nil && len(r.Old) == len(t.wire) { // REPLICA IDENTITY FULL: the whole old row
		if ev.Before, _, err = t.objectAs(cd, r.Old, all); err != nil {
			return kafkago.Message{}, err
		}
	}
	if r.Deleted {
		ev.Op = opDelete
		if r.Old == nil {
			cols := t.tm.Key
			if src.FullRow {
				cols = all
			}
			if ev.Before, _, err = t.objectAs(cd, r.Values, cols); err != nil {
				return kafkago.Message{}, err
			}
		}
	} else {
		var unchanged []string
		if ev.After, unchanged, err = t.objectAs(cd, r.Values, all); err != nil {
			return kafkago.Message{}, err
		}
		if len(unchanged) > 0 {
			names, _ := json.Marshal(unchanged)
			headers = append(headers, kafkago.Header{Key: HeaderUnchanged, Value: names})
		}
	}
	if ev.Op == opRead {
		ev.Before = nullJSON
	}
	value, err := json.Marshal(ev)
	if err != nil {
		return kafkago.Message{}, fmt.Errorf("%w: %v", errEncoding, err)
	}
	key, err := t.key(r, cd)
	if err != nil {
		return kafkago.Message{}, err
	}
	if cd.schemas {
		value = t.connectValue(st, value)
	}
	return kafkago.Message{Topic: t.topic, Key: key, Value: value, Headers: headers}, nil
}

// legacyMessage is message in ferry's form before Debezium compatibility.
func (t *table) legacyMessage(st stamp, r loader.Row) (kafkago.Message, error) {
	src := t.tm.Source
	env := envelope{Op: opUpdate, TsMs: st.now / 1000, Source: sourceInfo{Connector: "ferry", Name: st.prefix, DB: st.db,
		Schema: src.Schema, Table: src.Name, LSN: versionNumber(r.Version), TsMs: r.CommitMicros / 1000, Snapshot: "false"}}
	if r.TxID == 0 {
		env.Op, env.Source.Snapshot, env.Source.TsMs = opRead, "true", st.copied/1000
	} else {
		xid := r.TxID
		env.Source.TxID = &xid
	}
	headers := []kafkago.Header{{Key: HeaderSchema, Value: []byte(t.schemaID)}}
	if src.AppendOnly {
		headers = append(headers, kafkago.Header{Key: HeaderSeq, Value: strconv.AppendUint(nil, r.Seq, 10)})
	}
	var err error
	if r.Deleted {
		env.Op, env.After = opDelete, json.RawMessage("null")
		cols := t.tm.Key
		if src.FullRow {
			cols = allColumns(len(t.wire))
		}
		if env.Before, _, err = t.object(r.Values, cols); err != nil {
			return kafkago.Message{}, err
		}
	} else {
		env.Before = json.RawMessage("null")
		var unchanged []string
		if env.After, unchanged, err = t.object(r.Values, allColumns(len(t.wire))); err != nil {
			return kafkago.Message{}, err
		}
		if len(unchanged) > 0 {
			names, _ := json.Marshal(unchanged)
			headers = append(headers, kafkago.Header{Key: HeaderUnchanged, Value: names})
		}
	}
	value, err := json.Marshal(env)
	if err != nil {
		return kafkago.Message{}, fmt.Errorf("%w: %v", errEncoding, err)
	}
	key, err := t.key(r, codec{legacy: true})
	if err != nil {
		return kafkago.Message{}, err
	}
	return kafkago.Message{Topic: t.topic, Key: key, Value: value, Headers: headers}, nil
}

// key is the message key: the key columns as a JSON object, the row key of
// a FullRow table, none for an append-only table (spread over partitions).
//
// In the Debezium-compatible form a FullRow table's key is null, as
// Debezium's for a table without a key (HeaderRowKey has ferry's).
func (t *table) key(r loader.Row, cd codec) ([]byte, error) {
	switch {
	case t.tm.Source.FullRow && cd.legacy:
		return json.Marshal(map[string]string{schema.RowKeyColumn: r.RowKey})
	case t.tm.Source.FullRow, len(t.tm.Key) == 0:
		return nil, nil
	}
	k, _, err := t.objectAs(cd, r.Values, t.tm.Key)
	if err == nil && cd.schemas {
		k = t.connectKey(cd, k)
	}
	return k, err
}

// object writes the columns cols of vals as a JSON object in column order,
// and names the Unchanged ones.
func (t *table) object(vals []any, cols []int) (json.RawMessage, []string, error) {
	return t.objectAs(codec{legacy: true}, vals, cols)
}

// objectAs is object in the encoding of cd.
func (t *table) objectAs(cd codec, vals []any, cols []int) (json.RawMessage, []string, error) {
	var unchanged []string
	b := []byte{'{'}
	for n, i := range cols {
		if n > 0 {
			b = append(b, ',')
		}
		c := t.wire[i]
		b = appendString(b, c.name)
		b = append(b, ':')
		if vals[i] == loader.Unchanged {
			unchanged = append(unchanged, c.name)
			b = appendString(b, UnavailableValue)
			continue
		}
		var err error
		if b, err = appendEvent(b, c, cd, vals[i]); err != nil {
			return nil, nil, fmt.Errorf("%w: %s column %q: %v", errEncoding, t.tm.Source.QualifiedName(), c.name, err)
		}
	}
	return append(b, '}'), unchanged, nil
}

func allColumns(n int) []int {
	cols := make([]int, n)
	for i := range cols {
		cols[i] = i
	}
	return cols
}

// decoded is one change message read back.
type decoded struct {
	op  string
	row loader.Row
	// carrier, on the old key's delete of a key change whose new row has
	// unchanged values, is the row that carries the old key's values over
	// to the new key: see carrierRow.
	carrier *loader.Row
	// moved is set on the new row of a key change with unchanged values:
	// it must not be written before its carrier.
	moved bool
	// gone, on an update of a FullRow table that changed the row, is the
	// old row's delete, queued before row.
	gone *loader.Row
}

// decode rebuilds the loader.Row the publisher was handed, its values
// converted for the loader's mapping t.tm. It reads both ferry's earlier
// form (no HeaderFormat) and the Debezium-compatible one.
func (t *table) decode(m kafkago.Message) (decoded, error) {
	cd, err := parseCodec(header(m, HeaderFormat))
	if err != nil {
		return decoded{}, err
	}
	if m.Value == nil && header(m, HeaderTruncate) != nil { // a truncation's control record
		v, err := strconv.ParseUint(string(header(m, HeaderVersion)), 10, 64)
		if err != nil {
			return decoded{}, fmt.Errorf("truncation: header %s: %w", HeaderVersion, err)
		}
		return decoded{op: opTruncate, row: loader.Row{Version: v}}, nil
	}
	var env envelope
	if err := json.Unmarshal(unwrap(m.Value), &env); err != nil {
		return decoded{}, fmt.Errorf("read envelope: %w", err)
	}
	var version uint64
	if h := header(m, HeaderVersion); h != nil {
		version, err = strconv.ParseUint(string(h), 10, 64)
	} else {
		version, err = strconv.ParseUint(env.Source.LSN.String(), 10, 64)
	}
	if err != nil {
		return decoded{}, fmt.Errorf("version (source.lsn %q): %w", env.Source.LSN, err)
	}
	d := decoded{op: env.Op, row: loader.Row{Version: version}}
	if seq := header(m, HeaderSeq); seq != nil {
		if d.row.Seq, err = strconv.ParseUint(string(seq), 10, 64); err != nil {
			return decoded{}, fmt.Errorf("header %s: %w", HeaderSeq, err)
		}
	}
	var unchanged []string
	if h := header(m, HeaderUnchanged); h != nil {
		if err := json.Unmarshal(h, &unchanged); err != nil {
			return decoded{}, fmt.Errorf("header %s: %w", HeaderUnchanged, err)
		}
	}
	switch env.Op {
	case opTruncate:
		return d, nil
	case opDelete:
		d.row.Deleted = true
		if d.row.Values, err = t.values(cd, env.Before, nil, true); err == nil && len(unchanged) > 0 {
			d.carrier, err = t.carrierRow(m, cd, version, unchanged)
		}
	case opRead, opCreate, opUpdate:
		d.row.Values, err = t.values(cd, env.After, unchanged, false)
		d.moved = len(unchanged) > 0 && header(m, HeaderOldKey) != nil
		if err == nil && env.Op == opUpdate && !cd.legacy && t.tm.Source.FullRow && !isNull(env.Before) {
			err = t.fullRowUpdate(cd, &d, env.Before)
		}
	default:
		return decoded{}, fmt.Errorf("unknown op %q", env.Op)
	}
	if err != nil {
		return decoded{}, err
	}
	if t.tm.Source.FullRow {
		d.row.RowKey, err = rowKey(t.tm, d.row.Values)
	}
	return d, err
}

// fullRowUpdate reads the old row of an update of a FullRow table: its
// delete when the update changed the row (so its row key).
func (t *table) fullRowUpdate(cd codec, d *decoded, before json.RawMessage) error {
	old, err := t.values(cd, before, nil, true)
	if err != nil {
		return err
	}
	oldKey, err := rowKey(t.tm, old)
	if err != nil {
		return err
	}
	newKey, err := rowKey(t.tm, d.row.Values)
	if err != nil || oldKey == newKey {
		return err
	}
	d.gone = &loader.Row{Values: old, Version: d.row.Version, Deleted: true, RowKey: oldKey}
	return nil
}

func isNull(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "" || s == "null"
}

// carrierRow is the carrier of a key change, read from the old key's
// delete: a deleted row of the new key (HeaderNewKey), one version below
// the change, whose unchanged columns are loader.Unchanged. The loader
// queues it just before the delete; the sink resolves its values from the
// old key's row before the delete and stores them with it (see
// loader/clickhouse's movedFrom). The new row, read from another partition
// maybe much later, finds them as its key's previous version.
func (t *table) carrierRow(m kafkago.Message, cd codec, version uint64, unchanged []string) (*loader.Row, error) {
	newKey := header(m, HeaderNewKey)
	if newKey == nil || t.tm.Source.FullRow || len(t.tm.Key) == 0 || version == 0 {
		return nil, nil
	}
	vals, err := t.values(cd, unwrap(newKey), nil, true)
	if err != nil {
		return nil, fmt.Errorf("header %s: %w", HeaderNewKey, err)
	}
	marked := false
	for _, n := range unchanged {
		if i := slices.IndexFunc(t.tm.Columns, func(c schema.ColumnMap) bool { return c.Name == n }); i >= 0 && !slices.Contains(t.tm.Key, i) {
			vals[i], marked = loader.Unchanged, true
		}
	}
	if !marked { // the columns are gone from the loader's table
		return nil, nil
	}
	return &loader.Row{Values: vals, Version: version - 1, Deleted: true}, nil
}

// values converts an envelope's before or after into values of t.tm. A
// column missing from the object (a deleted row's non-key columns) gets its
// zero value.
func (t *table) values(cd codec, obj json.RawMessage, unchanged []string, deleted bool) ([]any, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(obj, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("read row: want a JSON object, got %.40s", obj)
	}
	skip := map[string]bool{}
	for _, n := range unchanged {
		skip[n] = true
	}
	vals := make([]any, len(t.tm.Columns))
	for i, cm := range t.tm.Columns {
		raw, ok := fields[cm.Name]
		switch {
		case skip[cm.Name]:
			vals[i] = loader.Unchanged
			continue
		case !ok && (deleted || t.wire[i].missing):
			vals[i] = cm.Zero()
			continue
		case !ok:
			return nil, fmt.Errorf("column %q is missing", cm.Name)
		}
		text, null, err := eventText(t.wire[i], cd, raw)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", cm.Name, err)
		}
		if vals[i], err = cm.Convert(text, null); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// rowKey is a FullRow table's row key, computed from the loader's values
// exactly as the replicator computes it (a SHA-256 of schema.AppendEncoded
// of every value, first 16 bytes in hex), so that it matches the direct
// path's on the loader's server.
func rowKey(tm *schema.TableMap, vals []any) (string, error) {
	var buf []byte
	for i, v := range vals {
		if v == loader.Unchanged {
			return "", fmt.Errorf("column %q is unchanged (TOASTed) in a row identified by all its columns", tm.Columns[i].Name)
		}
		buf = schema.AppendRowKeyValue(buf, v, tm.Source)
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:16]), nil
}

func header(m kafkago.Message, key string) []byte {
	for _, h := range m.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}
