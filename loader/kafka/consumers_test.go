package kafka_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The acceptance rules of the consumers people put behind Debezium, as
// their public source states them (written from reading it, not copied).
// Each returns nil when the consumer takes the record, or why not.

// record is one Kafka record of a table topic.
type record struct {
	topic     string
	partition int32
	key       []byte
	value     []byte
	headers   map[string][]byte
}

// flinkDebeziumJSON: apache/flink
// flink-formats/flink-json/src/main/java/org/apache/flink/formats/json/debezium/DebeziumJsonDeserializationSchema.java
// at adda562571a4816e1ca838c5c89018a895d80975, deserialize: a null or
// empty value is skipped (a tombstone); otherwise the JSON (its "payload"
// with schema-include) must have "op" among c, r, u, d (else "Unknown op",
// an error without ignore-parse-errors); c and r need "after"; u needs
// "before" and "after" ("The before field of UPDATE message is null" when
// before is null: REPLICA IDENTITY FULL is needed, as with Debezium); d
// needs "before".
func flinkDebeziumJSON(r record, schemaInclude bool) error {
	if len(r.value) == 0 {
		return nil
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(r.value, &root); err != nil {
		return fmt.Errorf("corrupt Debezium JSON message: %v", err)
	}
	payload := root
	if schemaInclude {
		payload = nil
		if err := json.Unmarshal(root["payload"], &payload); err != nil || payload == nil {
			return fmt.Errorf("no payload")
		}
	}
	isNull := func(f string) bool { v := payload[f]; return len(v) == 0 || string(v) == "null" }
	var op string
	if err := json.Unmarshal(payload["op"], &op); err != nil {
		return fmt.Errorf("op: %v", err)
	}
	switch op {
	case "c", "r":
		if isNull("after") {
			return fmt.Errorf("%s without after", op)
		}
	case "u":
		if isNull("before") {
			return fmt.Errorf("the before field of UPDATE message is null")
		}
		if isNull("after") {
			return fmt.Errorf("u without after")
		}
	case "d":
		if isNull("before") {
			return fmt.Errorf("the before field of DELETE message is null")
		}
	default:
		return fmt.Errorf("unknown \"op\" value %q", op)
	}
	return nil
}

// connectJSONConverter: apache/kafka
// connect/json/src/main/java/org/apache/kafka/connect/json/JsonConverter.java
// at d378c63e256bf2d14fefad745d1e6de78c24366a, toConnectData with
// schemas.enable=true: a null value is a null record; otherwise the JSON
// must be an object of exactly the two fields "schema" and "payload"; the
// payload is then converted by the schema (convertToConnect): a null for
// a field that is not optional fails, each type wants its JSON kind
// (integers for int8..int64, numbers for float and double, strings,
// booleans, base64 text for bytes, objects for structs by field, arrays).
// A key is read the same way.
func connectJSONConverter(doc []byte) error {
	if doc == nil {
		return nil
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(doc, &root); err != nil {
		return err
	}
	if len(root) != 2 || root["schema"] == nil || root["payload"] == nil {
		return fmt.Errorf(`JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain additional fields`)
	}
	var s connectSchema
	if err := json.Unmarshal(root["schema"], &s); err != nil {
		return fmt.Errorf("schema: %v", err)
	}
	return s.check(root["payload"], "payload")
}

type connectSchema struct {
	Type     string          `json:"type"`
	Optional bool            `json:"optional"`
	Name     string          `json:"name"`
	Field    string          `json:"field"`
	Fields   []connectSchema `json:"fields"`
	Items    *connectSchema  `json:"items"`
}

func (s connectSchema) check(v json.RawMessage, at string) error {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		if !s.Optional {
			return fmt.Errorf("%s: invalid null value for required %s field", at, s.Type)
		}
		return nil
	}
	switch s.Type {
	case "int8", "int16", "int32", "int64":
		var n json.Number
		if err := json.Unmarshal(v, &n); err != nil || strings.ContainsAny(n.String(), ".eE") {
			return fmt.Errorf("%s: %s wants an integer, got %s", at, s.Type, v)
		}
	case "float", "double":
		var f float64
		var str string
		if json.Unmarshal(v, &f) != nil && (json.Unmarshal(v, &str) != nil || (str != "NaN" && str != "Infinity" && str != "-Infinity")) {
			return fmt.Errorf("%s: %s wants a number, got %s", at, s.Type, v)
		}
	case "boolean":
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("%s: boolean, got %s", at, v)
		}
	case "string":
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			return fmt.Errorf("%s: string, got %s", at, v)
		}
	case "bytes":
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			return fmt.Errorf("%s: bytes want base64 text, got %s", at, v)
		}
		if _, err := base64.StdEncoding.DecodeString(str); err != nil {
			return fmt.Errorf("%s: bytes want base64 text, got %s", at, v)
		}
	case "array":
		var elems []json.RawMessage
		if err := json.Unmarshal(v, &elems); err != nil {
			return fmt.Errorf("%s: array, got %s", at, v)
		}
		for i, e := range elems {
			if err := s.Items.check(e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case "struct":
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(v, &fields); err != nil {
			return fmt.Errorf("%s: struct, got %s", at, v)
		}
		for _, f := range s.Fields {
			if err := f.check(fields[f.Field], at+"."+f.Field); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%s: unknown schema type %q", at, s.Type)
	}
	return nil
}

// schemaName is the name of a Connect document's schema ("" for none).
func schemaName(doc []byte) string {
	var root struct {
		Schema struct {
			Name string `json:"name"`
		} `json:"schema"`
	}
	_ = json.Unmarshal(doc, &root)
	return root.Schema.Name
}

// debeziumSMT: debezium/debezium
// debezium-core/src/main/java/io/debezium/transforms/SmtManager.java at
// 058d2504992371c9a4255ce69545cb070f152b8a: isValidEnvelope wants a value
// schema whose name is an Envelope's (Envelope.isEnvelopeSchema: the name
// ends in ".Envelope"), else ExtractNewRecordState passes the record
// through untouched; isValidKey wants a key schema named "*.Key". A
// tombstone (null value) is handled apart (drop.tombstones).
func debeziumSMT(r record) error {
	if r.value == nil {
		return nil
	}
	if n := schemaName(r.value); !strings.HasSuffix(n, ".Envelope") {
		return fmt.Errorf("value schema %q is not an Envelope: passed unchanged", n)
	}
	if r.key != nil && !strings.HasSuffix(schemaName(r.key), ".Key") {
		return fmt.Errorf("key schema %q is not a Key", schemaName(r.key))
	}
	return nil
}

// clickHouseSink: ClickHouse/clickhouse-kafka-connect
// src/main/java/com/clickhouse/kafka/connect/sink/data/convert/DebeziumRecordConvertor.java
// at 5f2217c25abcd149beda840caafde352e54cfc48: the Debezium path is taken
// for values whose schema name ends in ".Envelope"; op "t" (or none) is
// skipped; c, r and u take the "after" struct, d the "before" one (a null
// one is skipped with a warning: a lost row); _version is source.lsn,
// which must be an integer (a Long), else 0.
func clickHouseSink(r record) error {
	if r.value == nil {
		return nil
	}
	if !strings.HasSuffix(schemaName(r.value), ".Envelope") {
		return fmt.Errorf("not an Envelope: the envelope's fields would be taken as columns")
	}
	var doc struct {
		Payload struct {
			Op     string          `json:"op"`
			Before json.RawMessage `json:"before"`
			After  json.RawMessage `json:"after"`
			Source struct {
				LSN json.RawMessage `json:"lsn"`
			} `json:"source"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(r.value, &doc); err != nil {
		return err
	}
	p := doc.Payload
	if p.Op == "t" {
		return nil
	}
	data := p.After
	if p.Op == "d" {
		data = p.Before
	}
	if len(data) == 0 || string(data) == "null" {
		return fmt.Errorf("op %s without its row struct: skipped", p.Op)
	}
	var lsn int64
	if err := json.Unmarshal(p.Source.LSN, &lsn); err != nil || lsn <= 0 {
		return fmt.Errorf("source.lsn %s is not a positive integer: _version 0", p.Source.LSN)
	}
	return nil
}

// readTopics reads every record of the prefix's table topics.
func readTopics(t *testing.T, brokers []string, prefix string) []record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeRegex(), kgo.ConsumeTopics(`^`+prefix+`\.public\..*`),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []record
	idle := 0
	for idle < 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			h := map[string][]byte{}
			for _, x := range r.Headers {
				h[x.Key] = x.Value
			}
			out = append(out, record{topic: r.Topic, partition: r.Partition, key: r.Key, value: r.Value, headers: h})
		})
		if n == 0 {
			idle++
		}
	}
	return out
}
