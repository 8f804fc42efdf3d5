package kafka_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/loader/kafka"
)

// publishFormat publishes until caught up with the events of format.
func (e *env) publishFormat(slot string, format func(*kafka.Config)) {
	e.t.Helper()
	cfg := kafka.Config{Partitions: 2}
	format(&cfg)
	if err := e.publishWith(slot, cfg); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
}

const dbzSchema = `CREATE TABLE items (id bigint PRIMARY KEY, big bigint, n numeric(10,2), un numeric, arr int4[],
	d date, ts timestamp, ts3 timestamp(3), tz timestamptz, tm time, j jsonb, u uuid, by bytea, body text,
	tarr text[], narr numeric(5,2)[], tzarr timestamptz[], barr bool[], darr date[], m int4[][]);
CREATE TABLE arrkey (k text[] PRIMARY KEY, v int);
CREATE TABLE full_pk (id int PRIMARY KEY, v text NOT NULL); ALTER TABLE full_pk REPLICA IDENTITY FULL;
CREATE TABLE keyless (a int, b text); ALTER TABLE keyless REPLICA IDENTITY FULL`

const dbzSnapshot = `INSERT INTO items VALUES
	(1, 9223372036854775807, 1.50, 123.456, '{1,NULL,3}', '2024-05-01', '2024-05-01 12:00:00.123456',
	 '2024-05-01 12:00:00.123', '2024-05-01 12:00:00.5+02', '13:14:15.000016', '{"k":1}',
	 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\x00ff', 'short'),
	(2, -9007199254740993, -0.01, 'NaN', '{}', 'infinity', '-infinity', NULL, 'infinity', '24:00:00', NULL, NULL, NULL, NULL);
INSERT INTO items (id, body) SELECT 10, string_agg(md5(g::text), '') FROM generate_series(1, 400) g;
UPDATE items SET tarr = ARRAY['a "b"', NULL, 'NULL', 'c,d', 'e\f', 'ü€', '', 'x y', '{}'],
	narr = '{1.50,NULL,-0.01}', tzarr = '{"2024-05-01 12:00:00.5+00","0044-03-15 12:00:00+00 BC"}',
	barr = '{t,f,NULL}', darr = '{2024-05-01,infinity}', m = '{{1,2},{3,NULL}}' WHERE id = 1;
UPDATE items SET tarr = '{}', narr = '{NULL}', m = '{}' WHERE id = 2;
INSERT INTO arrkey VALUES ('{a,"b c"}', 1), ('{}', 2), ('{NULL,"x\\y"}', 3);
INSERT INTO full_pk VALUES (1, 'one'), (2, 'two'), (3, 'three');
INSERT INTO keyless VALUES (1, 'a'), (2, 'b'), (3, 'c')`

var dbzChanges = []string{
	`INSERT INTO items (id, big, n, arr) VALUES (100, 9007199254740993, 99.99, '{NULL}')`,
	`UPDATE items SET big = 5 WHERE id = 100`,
	`UPDATE items SET tarr = '{"q\"uote",back\\slash,NULL}', narr = '{}', darr = '{"0044-03-15 BC"}' WHERE id = 1`,
	`UPDATE arrkey SET v = 20 WHERE k = '{}'`,
	`UPDATE arrkey SET k = '{z}' WHERE v = 1`, // an array key changes
	`DELETE FROM arrkey WHERE v = 3`,
	`INSERT INTO arrkey VALUES ('{"new, row",NULL}', 4)`,
	`UPDATE items SET id = 1000 WHERE id = 100`, // a key change
	`DELETE FROM items WHERE id = 2`,
	`UPDATE items SET n = 7 WHERE id = 10`, // body is TOASTed and unchanged
	`UPDATE full_pk SET v = 'zwei' WHERE id = 2`,
	`DELETE FROM full_pk WHERE id = 3`,
	`UPDATE full_pk SET id = 30 WHERE id = 1`, // a key change with the whole old row
	`UPDATE keyless SET b = 'bb' WHERE a = 2`,
	`DELETE FROM keyless WHERE a = 3`,
	`INSERT INTO keyless VALUES (4, 'd')`,
	`ALTER TABLE items ADD COLUMN extra text`, // a schema change
	`INSERT INTO items (id, extra) VALUES (200, 'new column')`,
	`TRUNCATE full_pk`,
	`INSERT INTO full_pk VALUES (5, 'after truncate')`,
}

// TestDebeziumConsumersAccept runs a snapshot and every kind of change
// through Kafka with Debezium's settings (truncate events on), checks every
// record against the consumers' rules, and loads the topics with ferry load:
// ClickHouse equals PostgreSQL.
func TestDebeziumConsumersAccept(t *testing.T) {
	for _, schemas := range []bool{false, true} {
		t.Run(map[bool]string{false: "schemaless", true: "schemas"}[schemas], func(t *testing.T) {
			e := newEnv(t)
			if e.chSink("_direct").Capabilities().DateTime64 {
				e.textCols = []string{"public.items.d", "public.items.ts", "public.items.tz"}
			}
			// Schemaless with Debezium's defaults (no truncate events);
			// with schemas, truncate events on.
			format := func(c *kafka.Config) { c.Format = kafka.Format{TruncateEvents: schemas, Schemas: schemas} }
			e.exec(dbzSchema, dbzSnapshot)
			e.publishFormat("dbz_slot", format)
			e.exec(dbzChanges...)
			e.publishFormat("dbz_slot", format)

			recs := readTopics(t, e.brokers, "it")
			checkConsumers(t, recs, schemas)
			checkArrays(t, recs, schemas)
			checkSnapshotLast(t, recs, schemas)

			viaKafka := e.chSink("_kafka")
			if err := e.load(viaKafka, "dbz-loader", 0); err != nil {
				t.Fatalf("load: %v", err)
			}
			e.verifyAll(viaKafka)
		})
	}
}

func payloadOf(t *testing.T, r record, schemas bool) map[string]json.RawMessage {
	t.Helper()
	var root map[string]json.RawMessage
	if err := json.Unmarshal(r.value, &root); err != nil {
		t.Fatalf("%s: %v", r.value, err)
	}
	if schemas {
		var p map[string]json.RawMessage
		if err := json.Unmarshal(root["payload"], &p); err != nil {
			t.Fatalf("payload of %s: %v", r.value, err)
		}
		return p
	}
	return root
}

func checkConsumers(t *testing.T, recs []record, schemas bool) {
	t.Helper()
	ops := map[string]string{}   // topic/partition: ops in order
	opsOf := map[string]string{} // topic: every op
	truncatedPart := map[string]bool{}
	keyChange := map[string]string{}
	for _, r := range recs {
		if err := flinkDebeziumJSON(r, schemas); err != nil {
			// Debezium sends these too: an update of a REPLICA IDENTITY
			// DEFAULT table has before null, which Flink refuses.
			p := payloadOf(t, r, schemas)
			// And Flink refuses Debezium's 't' events, which is why
			// they are off by default.
			if !((r.topic == "it.public.items" || r.topic == "it.public.arrkey") && string(p["op"]) == `"u"` && string(p["before"]) == "null") && string(p["op"]) != `"t"` {
				t.Errorf("Flink debezium-json refuses a record of %s: %v: %s", r.topic, err, r.value)
			}
		}
		if schemas {
			for name, rule := range map[string]func(record) error{"JsonConverter (value)": func(r record) error { return connectJSONConverter(r.value) },
				"JsonConverter (key)":   func(r record) error { return connectJSONConverter(r.key) },
				"ExtractNewRecordState": debeziumSMT, "ClickHouse sink": clickHouseSink} {
				// A known difference: NaN numerics, which Connect's
				// Decimal cannot hold, go as the string "NaN".
				if err := rule(r); err != nil && !strings.Contains(err.Error(), `got "NaN"`) {
					t.Errorf("%s refuses a record of %s: %v: %s", name, r.topic, err, r.value)
				}
			}
		} else if err := clickHouseSink(r); err == nil && r.value != nil {
			t.Errorf("without schemas the ClickHouse sink cannot tell the envelope: its rule should refuse %s", r.value)
		}
		part := r.topic + "/" + string(rune('0'+r.partition))
		if r.value == nil {
			if r.headers["ferry.truncate"] != nil {
				ops[part] += "·"
			}
			continue
		}
		p := payloadOf(t, r, schemas)
		var op string
		_ = json.Unmarshal(p["op"], &op)
		ops[part] += op
		opsOf[r.topic] += op
		// REPLICA IDENTITY FULL with a primary key: before is the whole
		// old row for updates and deletes, as Debezium's.
		if r.topic == "it.public.full_pk" && (op == "u" || op == "d") && !strings.Contains(string(p["before"]), `"v":"`) {
			t.Errorf("full_pk %s: before %s is not the whole old row", op, p["before"])
		}
		// Within a partition: records reach readTopics in the order of
		// their partition's fetches, so across partitions in no set order.
		if op == "r" && truncatedPart[part] {
			t.Errorf("%s: a snapshot row after a 't'", part)
		}
		if op == "t" {
			truncatedPart[part] = true
		}
		if r.headers[kafka.DebeziumNewKey] != nil && op == "d" {
			keyChange[r.topic] += "d"
		}
		if r.headers[kafka.DebeziumOldKey] != nil {
			keyChange[r.topic] += op
		}
		var src map[string]any
		_ = json.Unmarshal(p["source"], &src)
		for _, f := range []string{"version", "connector", "name", "ts_ms", "ts_us", "ts_ns", "snapshot", "db", "sequence",
			"schema", "table", "txId", "lsn", "xmin"} {
			if _, ok := src[f]; !ok {
				t.Errorf("%s: source has no %q: %s", r.topic, f, p["source"])
			}
		}
		if src["connector"] != "postgresql" {
			t.Errorf("source.connector %v", src["connector"])
		}
	}
	for part, got := range ops {
		if !strings.HasPrefix(got, "·") {
			t.Errorf("%s: ops %q: want the copy's control record first", part, got)
		}
	}
	truncate := map[bool]string{false: "", true: "t"}[schemas]
	for topic, want := range map[string]string{"it.public.items": "rcud", "it.public.full_pk": "rud" + truncate, "it.public.keyless": "rudc"} {
		for _, op := range want {
			if !strings.ContainsRune(opsOf[topic], op) {
				t.Errorf("%s: ops %q have no %q", topic, opsOf[topic], op)
			}
		}
		if !schemas && strings.Contains(opsOf[topic], "t") {
			t.Errorf("%s: a 't' event without --kafka-truncate-events", topic)
		}
	}
	// The two halves of a key change go to the partitions of their keys,
	// whose records readTopics gets in no set order: both must be there.
	for _, topic := range []string{"it.public.items", "it.public.full_pk"} {
		got := []byte(keyChange[topic])
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		keyChange[topic] = string(got)
	}
	if keyChange["it.public.items"] != "cd" || keyChange["it.public.full_pk"] != "cd" {
		t.Errorf("key changes: want a d with %s and a c with %s, got %v", kafka.DebeziumNewKey, kafka.DebeziumOldKey, keyChange)
	}
}

// checkSnapshotLast checks that one row of the initial snapshot says
// snapshot "last", as Debezium's last snapshot row does, and that no row
// of the snapshot follows it on its partition.
func checkSnapshotLast(t *testing.T, recs []record, schemas bool) {
	t.Helper()
	type src struct {
		Snapshot string `json:"snapshot"`
		LSN      int64  `json:"lsn"`
	}
	var lasts []int
	firstLSN := map[int64]bool{}
	for i, r := range recs {
		if r.value == nil {
			continue
		}
		var so src
		_ = json.Unmarshal(payloadOf(t, r, schemas)["source"], &so)
		switch so.Snapshot {
		case "last":
			lasts = append(lasts, i)
		case "first":
			firstLSN[so.LSN] = true
		}
	}
	if len(lasts) != 1 {
		t.Fatalf("want one record with snapshot \"last\", got %d", len(lasts))
	}
	last := recs[lasts[0]]
	var so src
	_ = json.Unmarshal(payloadOf(t, last, schemas)["source"], &so)
	if !firstLSN[so.LSN] || string(payloadOf(t, last, schemas)["op"]) != `"r"` {
		t.Errorf("the \"last\" record is not a row of the initial snapshot: %s", last.value)
	}
	for _, r := range recs[lasts[0]+1:] {
		if r.topic != last.topic || r.partition != last.partition {
			continue
		}
		if r.value != nil && string(payloadOf(t, r, schemas)["op"]) == `"r"` {
			t.Errorf("a snapshot row after the \"last\" one on its partition: %s", r.value)
		}
		break
	}
}

// checkArrays checks that arrays go as Debezium sends them: JSON arrays
// with null for NULL elements, numerics and times in the modes' encodings;
// an array of two dimensions as its text; with schemas, an array field's
// Connect schema is an ARRAY of the element's.
func checkArrays(t *testing.T, recs []record, schemas bool) {
	t.Helper()
	want := map[string]string{
		"tarr":  `["a \"b\"",null,"NULL","c,d","e\\f","ü€","","x y","{}"]`,
		"arr":   `[1,null,3]`,
		"narr":  `["AJY=",null,"/w=="]`,
		"tzarr": `["2024-05-01T12:00:00.5Z","-0043-03-15T12:00:00Z"]`,
		"barr":  `[true,false,null]`,
		"darr":  `[19844,2147483647]`,
		"m":     `"{{1,2},{3,NULL}}"`,
	}
	seen := false
	for _, r := range recs {
		if r.topic != "it.public.items" || r.value == nil {
			continue
		}
		// Also after the schema change, whose relation message does not
		// say how many dimensions a column was declared with.
		if schemas && !strings.Contains(string(r.value), `{"type":"string","optional":true,"field":"m"}`) {
			t.Errorf("m, declared with two dimensions, has not a string schema in %s", r.value)
		}
		p := payloadOf(t, r, schemas)
		var after map[string]json.RawMessage
		if seen || string(p["op"]) != `"r"` || json.Unmarshal(p["after"], &after) != nil || string(after["id"]) != "1" {
			continue
		}
		seen = true // the first copy's row, not the rebuild's after the schema change
		for col, w := range want {
			if string(after[col]) != w {
				t.Errorf("items.%s: %s, want %s", col, after[col], w)
			}
		}
		if schemas && !strings.Contains(string(r.value), `{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"tarr"}`) {
			t.Errorf("no ARRAY of optional strings for tarr in %s", r.value)
		}

	}
	if !seen {
		t.Error("no snapshot row of items with id 1")
	}
}

// TestLoaderReadsOldAndNewForm is a running pipeline's upgrade: its topics
// hold events of ferry's earlier form (a publisher before Debezium
// compatibility: op "u" for inserts, legacy values, 't' truncations)
// followed by events of the new one (a control-record truncation, the
// Debezium encodings), and one ferry load loads them all: ClickHouse
// equals PostgreSQL.
func TestLoaderReadsOldAndNewForm(t *testing.T) {
	e := newEnv(t)
	if e.chSink("_direct").Capabilities().DateTime64 {
		e.textCols = []string{"public.items.d", "public.items.ts", "public.items.tz"}
	}
	e.exec(dbzSchema, dbzSnapshot)
	e.publishFormat("up_slot", kafka.LegacyFormat)
	half := len(dbzChanges) / 2
	e.exec(dbzChanges[:half]...)
	e.exec(`TRUNCATE keyless`, `INSERT INTO keyless VALUES (7, 'old form after truncate')`)
	e.publishFormat("up_slot", kafka.LegacyFormat)
	viaKafka := e.chSink("_kafka")
	if err := e.load(viaKafka, "up-loader", 0); err != nil { // the loader upgraded first, reading the old form
		t.Fatalf("load the old form: %v", err)
	}
	e.exec(dbzChanges[half:]...)
	e.exec(`TRUNCATE keyless`, `INSERT INTO keyless VALUES (8, 'new form after truncate'), (9, NULL)`,
		`UPDATE items SET big = -1, n = 3.25, d = '2000-02-29' WHERE id = 1`, `INSERT INTO items (id, arr) VALUES (300, '{NULL,NULL}')`)
	e.publishFormat("up_slot", func(*kafka.Config) {})

	old, nu := 0, 0
	for _, r := range readTopics(t, e.brokers, "it") {
		switch {
		case r.value == nil:
		case r.headers[kafka.HeaderFormat] == nil:
			old++
		default:
			nu++
		}
	}
	if old == 0 || nu == 0 {
		t.Fatalf("want events of both forms on the topics, got %d old and %d new", old, nu)
	}
	if err := e.load(viaKafka, "up-loader", 0); err != nil {
		t.Fatalf("load: %v", err)
	}
	e.verifyAll(viaKafka)
}
