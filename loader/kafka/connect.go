package kafka

import (
	"encoding/json"
	"strconv"
)

// Kafka Connect's JSON form with schemas (--kafka-schemas): every key and
// value is {"schema": ..., "payload": ...}, the schema named as Debezium's
// PostgreSQL connector names it, so that JsonConverter with
// schemas.enable=true reads the records, and what acts on Debezium's
// envelopes only (ExtractNewRecordState, the ClickHouse sink's Debezium
// mode) recognises them by the value schema's name ending in ".Envelope".

// connectField is one field of a Connect struct schema, in JsonConverter's
// JSON (asConnectSchema / asJsonSchema).
type connectField struct {
	Type       string            `json:"type"`
	Items      *connectField     `json:"items,omitempty"`
	Fields     []connectField    `json:"fields,omitempty"`
	Optional   bool              `json:"optional"`
	Name       string            `json:"name,omitempty"`
	Version    int               `json:"version,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
	Field      string            `json:"field,omitempty"`
}

// columnSchema is the Connect schema of one column's values, by Debezium's
// data type mappings for the modes of cd.
func columnSchema(c column, cd codec) connectField {
	if c.array || c.textArray {
		elem := c
		elem.array, elem.textArray, elem.notNull = false, false, false
		items := columnSchema(elem, cd)
		return connectField{Type: "array", Items: &items, Optional: !c.notNull}
	}
	f := connectField{Type: "string", Optional: !c.notNull}
	switch c.kind {
	case kindInt:
		switch c.oid {
		case oidInt2:
			f.Type = "int16"
		case oidInt4:
			f.Type = "int32"
		default:
			f.Type = "int64"
		}
	case kindFloat:
		f.Type = "double"
		if c.oid == oidFloat4 {
			f.Type = "float"
		}
	case kindBool:
		f.Type = "boolean"
	case kindUUID:
		f.Name, f.Version = "io.debezium.data.Uuid", 1
	case kindBytea:
		f.Type = "bytes"
	case kindDecimal:
		switch cd.decimal {
		case DecimalPrecise:
			f.Type, f.Name, f.Version = "bytes", "org.apache.kafka.connect.data.Decimal", 1
			f.Parameters = map[string]string{"scale": strconv.Itoa(c.prec)}
		case DecimalDouble:
			f.Type = "double"
		}
	case kindNumeric:
		switch cd.decimal {
		case DecimalPrecise:
			f.Type, f.Name, f.Version = "struct", "io.debezium.data.VariableScaleDecimal", 1
			f.Fields = []connectField{{Type: "int32", Field: "scale"}, {Type: "bytes", Field: "value"}}
		case DecimalDouble:
			f.Type = "double"
		}
	case kindDate:
		switch cd.time {
		case TimeAdaptive:
			f.Type, f.Name, f.Version = "int32", "io.debezium.time.Date", 1
		case TimeConnect:
			f.Type, f.Name, f.Version = "int32", "org.apache.kafka.connect.data.Date", 1
		}
	case kindTimestamp:
		switch {
		case cd.time == TimeConnect:
			f.Type, f.Name, f.Version = "int64", "org.apache.kafka.connect.data.Timestamp", 1
		case cd.time == TimeAdaptive && c.prec <= 3:
			f.Type, f.Name, f.Version = "int64", "io.debezium.time.Timestamp", 1
		case cd.time == TimeAdaptive:
			f.Type, f.Name, f.Version = "int64", "io.debezium.time.MicroTimestamp", 1
		}
	case kindTimestampTZ:
		f.Name, f.Version = "io.debezium.time.ZonedTimestamp", 1
	case kindTime:
		switch {
		case cd.time == TimeConnect:
			f.Type, f.Name, f.Version = "int32", "org.apache.kafka.connect.data.Time", 1
		case cd.time == TimeAdaptive && c.prec <= 3:
			f.Type, f.Name, f.Version = "int32", "io.debezium.time.Time", 1
		case cd.time == TimeAdaptive:
			f.Type, f.Name, f.Version = "int64", "io.debezium.time.MicroTime", 1
		}
	case kindText:
		if c.oid == oidJSON || c.oid == oidJSONB {
			f.Name, f.Version = "io.debezium.data.Json", 1
		}
	}
	return f
}

// rowSchema is the struct of the columns cols, named name.
func (t *table) rowSchema(cd codec, cols []int, name, field string, optional bool) connectField {
	s := connectField{Type: "struct", Optional: optional, Name: name, Field: field}
	for _, i := range cols {
		f := columnSchema(t.wire[i], cd)
		f.Field = t.wire[i].name
		s.Fields = append(s.Fields, f)
	}
	return s
}

// schemaName is Debezium's <topic prefix>.<schema>.<table>, the topic's name.
func (t *table) schemaName() string { return t.topic }

// sourceSchema is io.debezium.connector.postgresql.Source.
func sourceSchema() connectField {
	str := func(n string, opt bool) connectField { return connectField{Type: "string", Field: n, Optional: opt} }
	i64 := func(n string, opt bool) connectField { return connectField{Type: "int64", Field: n, Optional: opt} }
	return connectField{Type: "struct", Name: "io.debezium.connector.postgresql.Source", Field: "source", Fields: []connectField{
		str("version", false), str("connector", false), str("name", false), i64("ts_ms", false),
		{Type: "string", Field: "snapshot", Optional: true, Name: "io.debezium.data.Enum", Version: 1,
			Parameters: map[string]string{"allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"}},
		str("db", false), str("sequence", true), i64("ts_us", true), i64("ts_ns", true), str("schema", false), str("table", false),
		i64("txId", true), i64("lsn", true), i64("xmin", true),
	}}
}

// valueSchema is the Envelope schema of the table's events.
func (t *table) valueSchema(cd codec) []byte {
	all := allColumns(len(t.wire))
	value := t.schemaName() + ".Value"
	env := connectField{Type: "struct", Name: t.schemaName() + ".Envelope", Version: 2, Fields: []connectField{
		t.rowSchema(cd, all, value, "before", true),
		t.rowSchema(cd, all, value, "after", true),
		sourceSchema(),
		{Type: "struct", Field: "transaction", Optional: true, Name: "event.block", Version: 1, Fields: []connectField{
			{Type: "string", Field: "id"}, {Type: "int64", Field: "total_order"}, {Type: "int64", Field: "data_collection_order"}}},
		{Type: "string", Field: "op"},
		{Type: "int64", Field: "ts_ms", Optional: true},
		{Type: "int64", Field: "ts_us", Optional: true},
		{Type: "int64", Field: "ts_ns", Optional: true},
	}}
	b, _ := json.Marshal(env) // plain structs always marshal
	return b
}

func (t *table) connectValue(st stamp, payload []byte) []byte {
	if t.connect == nil {
		t.connect = t.valueSchema(st.format.codec())
	}
	return wrap(t.connect, payload)
}

func (t *table) connectKey(cd codec, key []byte) []byte {
	if t.connectK == nil {
		s := t.rowSchema(cd, t.tm.Key, t.schemaName()+".Key", "", false)
		t.connectK, _ = json.Marshal(s)
	}
	return wrap(t.connectK, key)
}

func wrap(schema, payload []byte) []byte {
	b := append([]byte(`{"schema":`), schema...)
	b = append(b, `,"payload":`...)
	b = append(b, payload...)
	return append(b, '}')
}
