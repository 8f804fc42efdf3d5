package kafka

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Format says how row events are written, in the terms of the Debezium
// PostgreSQL connector's settings, so that what reads Debezium's topics
// reads ferry's. The zero value is Debezium's defaults.
type Format struct {
	// TruncateEvents publishes a TRUNCATE as Debezium's 't' event. Default
	// false, as Debezium (which skips truncations unless asked): a
	// truncation is then a control record, a null value with the
	// ferry.truncate header, which Debezium's consumers skip as a
	// tombstone and ferry load applies. A copy's leading truncation is
	// always a control record, so no topic starts with a 't'.
	// ferry run --kafka-truncate-events.
	TruncateEvents bool
	// Schemas writes keys and values in Kafka Connect's JSON form with
	// schemas (JsonConverter schemas.enable=true): {"schema", "payload"},
	// with Debezium's schema names. Default false: the payload alone.
	// ferry run --kafka-schemas.
	Schemas bool
	// DecimalMode is Debezium's decimal.handling.mode: "precise" (default:
	// numeric(p,s) as Connect's Decimal, the unscaled value's bytes in
	// base64; other numerics as VariableScaleDecimal), "string" or
	// "double" (lossy). ferry run --kafka-decimal-mode.
	DecimalMode string
	// TimeMode is Debezium's time.precision.mode: "adaptive" (default:
	// dates as days, timestamps and times as micro- or milliseconds by
	// their precision), "connect" (Connect's millisecond types; lossy
	// below the millisecond) or "isostring". ferry run --kafka-time-mode.
	TimeMode string
	// Version is source.version. Default "ferry".
	Version string
	// legacy writes the envelope of ferry before Debezium compatibility
	// (kept for the upgrade tests; see export_test.go).
	legacy bool
}

// Decimal and time modes.
const (
	DecimalPrecise = "precise"
	DecimalString  = "string"
	DecimalDouble  = "double"
	TimeAdaptive   = "adaptive"
	TimeConnect    = "connect"
	TimeISOString  = "isostring"
)

func (f Format) withDefaults() (Format, error) {
	if f.DecimalMode == "" {
		f.DecimalMode = DecimalPrecise
	}
	if f.TimeMode == "" {
		f.TimeMode = TimeAdaptive
	}
	if f.Version == "" {
		f.Version = "ferry"
	}
	switch f.DecimalMode {
	case DecimalPrecise, DecimalString, DecimalDouble:
	default:
		return f, fmt.Errorf("kafka: decimal mode %q: want precise, string or double", f.DecimalMode)
	}
	switch f.TimeMode {
	case TimeAdaptive, TimeConnect, TimeISOString:
	default:
		return f, fmt.Errorf("kafka: time mode %q: want adaptive, connect or isostring", f.TimeMode)
	}
	return f, nil
}

// Headers of the Debezium-compatible form.
const (
	// HeaderFormat is on every row event of the Debezium-compatible form:
	// "decimal=<mode>;time=<mode>;schemas=<0|1>", what a loader needs to
	// read the values back. Events without it are of ferry's earlier form.
	HeaderFormat = "ferry.format"
	// HeaderVersion is the row's version (ferry's _ferry_version), which
	// source.lsn no longer is for snapshot rows (Debezium puts the
	// snapshot's LSN there).
	HeaderVersion = "ferry.version"
	// HeaderRowKey is on the events of a table without a key identified by
	// its whole row (REPLICA IDENTITY FULL, no primary key), whose
	// message key is null as in Debezium: ferry's row key, which spreads
	// the events over the partitions.
	HeaderRowKey = "ferry.row-key"
	// DebeziumOldKey and DebeziumNewKey are Debezium's headers of a key
	// change, beside HeaderOldKey and HeaderNewKey.
	DebeziumOldKey = "__debezium.oldkey"
	DebeziumNewKey = "__debezium.newkey"
)

const opCreate = "c"

// codec is how a message's values are encoded: legacy for ferry's earlier
// form (no HeaderFormat), else Debezium's modes.
type codec struct {
	legacy  bool
	decimal string
	time    string
	schemas bool
}

func (f Format) codec() codec {
	return codec{legacy: f.legacy, decimal: f.DecimalMode, time: f.TimeMode, schemas: f.Schemas}
}

func (c codec) header() []byte {
	s := "0"
	if c.schemas {
		s = "1"
	}
	return []byte("decimal=" + c.decimal + ";time=" + c.time + ";schemas=" + s)
}

// parseCodec reads HeaderFormat; nil is the legacy form.
func parseCodec(h []byte) (codec, error) {
	if h == nil {
		return codec{legacy: true}, nil
	}
	var c codec
	for _, kv := range strings.Split(string(h), ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "decimal":
			c.decimal = v
		case "time":
			c.time = v
		case "schemas":
			c.schemas = v == "1"
		}
	}
	if _, err := (Format{DecimalMode: c.decimal, TimeMode: c.time}).withDefaults(); err != nil || c.decimal == "" || c.time == "" {
		return c, fmt.Errorf("header %s %q: unknown format", HeaderFormat, h)
	}
	return c, nil
}

// event is Debezium's change event value (the payload, with --kafka-schemas).
type event struct {
	Before      json.RawMessage `json:"before"`
	After       json.RawMessage `json:"after"`
	Source      source          `json:"source"`
	Transaction json.RawMessage `json:"transaction"`
	Op          string          `json:"op"`
	TsMs        int64           `json:"ts_ms"`
	TsUs        int64           `json:"ts_us"`
	TsNs        int64           `json:"ts_ns"`
}

// source is the Debezium PostgreSQL connector's source block
// (io.debezium.connector.postgresql.Source).
type source struct {
	Version   string `json:"version"`
	Connector string `json:"connector"`
	Name      string `json:"name"`
	TsMs      int64  `json:"ts_ms"`
	TsUs      int64  `json:"ts_us"`
	TsNs      int64  `json:"ts_ns"`
	// Snapshot is "first" on a table copy's first row, "true" on its
	// others, "false" when streaming (Debezium also says "last" on the
	// snapshot's last row, which ferry cannot know when it sends it).
	Snapshot string  `json:"snapshot"`
	DB       string  `json:"db"`
	Sequence *string `json:"sequence"`
	Schema   string  `json:"schema"`
	Table    string  `json:"table"`
	TxID     *int64  `json:"txId"`
	LSN      *int64  `json:"lsn"`
	Xmin     *int64  `json:"xmin"`
}

// timestamps sets the three times of one instant in microseconds.
func timestamps(us int64) (ms, micros, ns int64) { return us / 1000, us, us * 1000 }

// unwrap returns the payload of a Connect {"schema", "payload"} document,
// and other JSON as it is.
func unwrap(raw []byte) []byte {
	var doc struct {
		Schema  json.RawMessage `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &doc) != nil || doc.Schema == nil || doc.Payload == nil {
		return raw
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || len(fields) != 2 {
		return raw
	}
	return doc.Payload
}
