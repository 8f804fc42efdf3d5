package kafka

import (
	"strings"

	"github.com/ferry-cdc/ferry/schema"
)

// wireKind is how one column's values are written in the envelope. It
// follows from the column's mapping under the wire capabilities
// (schema.Capabilities{}: the integer forms of dates, timestamps and
// booleans), which is what the publisher is handed, and from its
// PostgreSQL type where one Go type stands for several.
type wireKind int

const (
	kindText        wireKind = iota // JSON string: the exact text (also numeric without Decimal, text-form types)
	kindInt                         // int2, int4, int8, oid, xid, cid, xid8: number, or string beyond ±(2^53-1)
	kindFloat                       // float4, float8: number, or "NaN", "Infinity", "-Infinity"
	kindDecimal                     // numeric(p,s): string, PostgreSQL's digits
	kindBool                        // bool: true or false
	kindUUID                        // uuid: string
	kindBytea                       // bytea: string, standard base64 of the bytes
	kindDate                        // date: "2024-05-01", "infinity", "-infinity"
	kindTimestamp                   // timestamp: "2024-05-01T12:00:00.000000"
	kindTimestampTZ                 // timestamptz: "2024-05-01T12:00:00.000000Z" (UTC)
	kindTime                        // time: "12:00:00.000000"
	kindLSN                         // pg_lsn: "16/B374D848"
	kindNumeric                     // numeric without Decimal (unconstrained, or beyond Decimal128): PostgreSQL's text
)

// PostgreSQL type OIDs whose Go values under the wire capabilities another
// type shares.
const (
	oidBytea       = 17
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidPgLSN       = 3220
	oidNumeric     = 1700
	oidInt2        = 21
	oidInt4        = 23
	oidFloat4      = 700
	oidJSON        = 114
	oidJSONB       = 3802
)

// precision is a column's fractional digits (timestamp, time) or scale
// (numeric(p,s)) from its typmod.
func precision(k wireKind, typmod int32) int {
	switch k {
	case kindTimestamp, kindTimestampTZ, kindTime:
		if typmod < 0 || typmod > 6 {
			return 6
		}
		return int(typmod)
	case kindDecimal:
		return int((typmod - 4) & 0x7ff)
	}
	return 0
}

// column is one column's wire description.
type column struct {
	name  string
	kind  wireKind
	array bool // Array(Nullable(T)): a JSON array of kind's values, null for NULL elements
	// textArray marks an array the wire mapping holds as String with
	// PostgreSQL's array text (a nullable or key array): in the Debezium
	// form it goes as a JSON array of kind's values too, its elements
	// converted by elemConv; kind, oid and prec are the element's. The
	// legacy form keeps the text.
	textArray bool
	elemConv  func(text []byte) (any, error)
	// oid is the PostgreSQL type (the element's for an array); prec the
	// fractional digits of a timestamp or time (6 when unsaid) or the
	// scale of a numeric(p,s); notNull, the column's NOT NULL. Debezium's
	// encodings and Connect schemas follow them.
	oid     uint32
	prec    int
	notNull bool
	// missing marks a column the message's description does not have (a
	// row read late into a newer mapping): it gets its zero value.
	missing bool
}

// wireColumns describes the columns of a table mapped with the wire
// capabilities.
func wireColumns(wire *schema.TableMap) []column {
	cols := make([]column, len(wire.Columns))
	for i, cm := range wire.Columns {
		src := wire.Source.Columns[i]
		t := strings.TrimPrefix(cm.Type, "LowCardinality(")
		t = strings.TrimPrefix(t, "Nullable(")
		oid := src.TypeOID
		if inner, ok := strings.CutPrefix(t, "Array(Nullable("); ok {
			cols[i].array = true
			t, oid = inner, src.ElemOID
		}
		if et, conv, ok := schema.TextArrayElement(src, wire.Caps); ok {
			cols[i].textArray, cols[i].elemConv = true, conv
			t, oid = et, src.ElemOID
		}
		cols[i].name = cm.Name
		cols[i].kind = kindOf(strings.TrimRight(t, ")"), oid, src.Text)
		if cols[i].kind == kindText && oid == oidNumeric && !src.Text {
			cols[i].kind = kindNumeric
		}
		cols[i].oid, cols[i].notNull = oid, src.NotNull
		cols[i].prec = precision(cols[i].kind, src.TypeMod)
	}
	return cols
}

// kindOf classifies a ClickHouse type (without Nullable) of the wire mapping.
func kindOf(chType string, oid uint32, text bool) wireKind {
	switch {
	case text:
		return kindText
	case strings.HasPrefix(chType, "Decimal("):
		return kindDecimal
	}
	switch chType {
	case "Int16", "UInt32":
		return kindInt
	case "Int32":
		if oid == oidDate {
			return kindDate
		}
		return kindInt
	case "Int64":
		switch oid {
		case oidTimestamp:
			return kindTimestamp
		case oidTimestamptz:
			return kindTimestampTZ
		case oidTime:
			return kindTime
		}
		return kindInt
	case "UInt64":
		if oid == oidPgLSN {
			return kindLSN
		}
		return kindInt
	case "Float32", "Float64":
		return kindFloat
	case "UInt8", "Bool":
		return kindBool
	case "UUID":
		return kindUUID
	case "String":
		if oid == oidBytea {
			return kindBytea
		}
	}
	return kindText
}
