package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// PostgreSQL type OIDs ferry maps to a native ClickHouse type.
const (
	oidBool        = 16
	oidBytea       = 17
	oidChar        = 18
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidOID         = 26
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidNumeric     = 1700
	oidUUID        = 2950
	oidJSONB       = 3802
)

// maxDecimal128 is the widest Decimal of every server (Decimal128), and
// maxDecimal256 the widest where the server has Decimal256.
const (
	maxDecimal128 = 38
	maxDecimal256 = 76
)

// kind is how values of one PostgreSQL type go to ClickHouse: the
// non-Nullable ClickHouse type, converters for a scalar and for a
// one-dimensional array of it, and the zero values of both.
type kind struct {
	chType     string
	scalar     converter
	array      converter
	zero       any
	emptyArray any
	// wholeArray is set for element types whose arrays ferry doesn't split
	// (their delimiter is not a comma, or not known): an array of them is
	// String holding PostgreSQL's array text.
	wholeArray bool
	// typed makes a typed ColumnBuilder of a scalar whose ClickHouse type
	// is typedCH (not one changed after newKind, as an enum's).
	typed   func(ColumnMap) ColumnBuilder
	typedCH string
	// bin reads the type's binary form for the typed builder (binaryOf).
	bin any
}

// newKind builds a kind from a typed parser, so that scalars and arrays of
// the type convert alike.
func newKind[T any](chType string, p parser[T], zero T) kind {
	return kind{chType: chType, scalar: scalarConv(p), array: arrayConv(p), zero: zero, emptyArray: []*T{},
		typed: newTyped(p), typedCH: chType}
}

// stringKind is a String column holding PostgreSQL's text form.
func stringKind() kind {
	k := newKind("String", parseString, "")
	k.typed = newStringBuilder
	return k
}

// Map maps table t onto a ClickHouse server with capabilities caps. It fails
// when the table has no columns, or has no key column and is not
// append-only. Every returned ColumnMap converts values losslessly or fails.
func Map(t Table, caps Capabilities) (*TableMap, error) {
	if len(t.Columns) == 0 {
		return nil, fmt.Errorf("table %s has no columns; fix: add a column or leave the table out", t.QualifiedName())
	}
	m := &TableMap{Source: t, Name: CHTableName(t.Schema, t.Name), Caps: caps}
	for i, col := range t.Columns {
		m.Columns = append(m.Columns, mapColumn(t, col, caps))
		if col.Key && !t.AppendOnly && !t.FullRow {
			m.Key = append(m.Key, i)
		}
	}
	if len(m.Key) == 0 && !t.AppendOnly && !t.FullRow {
		return nil, fmt.Errorf("table %s has no key column; fix: add a primary key, "+
			"set REPLICA IDENTITY USING INDEX or FULL, or replicate it with --append-only %s.%s",
			t.QualifiedName(), t.Schema, t.Name)
	}
	return m, nil
}

// mapColumn maps one column. Key and NOT NULL columns are never Nullable,
// nor any column of a NullAsDefault table.
func mapColumn(t Table, col Column, caps Capabilities) ColumnMap {
	notNull := col.NotNull || col.Key || t.NullAsDefault
	cm := ColumnMap{Name: col.Name, fix: "--text-columns " + t.Schema + "." + t.Name + "." + col.Name, key: col.Key,
		nullZero: t.NullAsDefault && !col.NotNull && !col.Key}
	var k kind
	switch {
	case col.Text:
		k = stringKind()
	case col.ElemOID != 0:
		k, cm.Fallback = arrayKind(col, caps, notNull)
	case col.Enum:
		k = enumKind(caps)
	case nativeJSON(t, col, caps):
		k = jsonKind()
		cm.fix += " (the column as String), or --json-type=string (every json and jsonb column)"
	default:
		var ok bool
		if k, ok = scalarKind(col.TypeOID, col.TypeBaseName, col.TypeMod, caps); !ok {
			k, cm.Fallback = stringKind(), true
		} else if k.bin == nil {
			k.bin = binaryOf(col.TypeOID, caps)
		}
	}
	cm.Type, cm.conv, cm.zero = k.chType, k.scalar, k.zero
	if k.typed != nil && k.chType == k.typedCH {
		cm.typed, cm.bin = k.typed, k.bin
	} else if _, ok := k.bin.(binText); ok {
		cm.bin = k.bin // the text itself, which the []any builder converts
	}
	if !notNull {
		cm.Type, cm.Nullable, cm.zero = nullable(cm.Type), true, nil
	}
	return cm
}

// nativeJSON: the column is json or jsonb and goes to ClickHouse's JSON
// type. Key columns stay String: ClickHouse can't sort by JSON.
func nativeJSON(t Table, col Column, caps Capabilities) bool {
	return t.NativeJSON && caps.JSON && !col.Key && (col.TypeOID == oidJSON || col.TypeOID == oidJSONB)
}

// arrayKind maps an array column. A NOT NULL array declared with at most
// one dimension becomes Array(Nullable(T)) converted to []*T; a nullable one
// (ClickHouse has no Nullable(Array)), a key one (ClickHouse can't sort by an
// array of Nullable) and one declared with more dimensions (Column.Dims)
// become String holding PostgreSQL's array text, and so does an array of
// box or of an extension type, whose delimiter is not a comma or not known
// (PostGIS uses ':'). An array of an unmapped element type is a fallback
// String.
func arrayKind(col Column, caps Capabilities, notNull bool) (k kind, fallback bool) {
	elem, ok := scalarKind(col.ElemOID, col.TypeBaseName, col.TypeMod, caps)
	if col.Enum {
		elem, ok = stringKind(), true
	}
	switch {
	case !ok:
		return stringKind(), true
	case !notNull || col.Key || col.Dims > 1 || elem.wholeArray:
		return stringKind(), false
	}
	return kind{chType: "Array(Nullable(" + elem.chType + "))", scalar: elem.array, zero: elem.emptyArray}, false
}

// enumKind maps an enum: LowCardinality(String) where the server has it.
func enumKind(caps Capabilities) kind {
	k := stringKind()
	k.bin = binText(appendBytes) // an enum's binary form is its label
	if caps.LowCardinality {
		k.chType = "LowCardinality(String)"
	}
	return k
}

// nullable wraps a ClickHouse type in Nullable, inside LowCardinality as
// ClickHouse requires.
func nullable(t string) string {
	if inner, ok := strings.CutPrefix(t, "LowCardinality("); ok {
		return "LowCardinality(Nullable(" + inner + ")"
	}
	return "Nullable(" + t + ")"
}

// scalarKind is the mapping of a non-array, non-enum type of the given OID
// and unqualified name (pg_type.typname, which identifies extension types);
// ok is false when ferry has no mapping for it.
func scalarKind(oid uint32, name string, typmod int32, caps Capabilities) (k kind, ok bool) {
	switch oid {
	case oidInt2:
		return newKind("Int16", parseInt16, int16(0)), true
	case oidInt4:
		return newKind("Int32", parseInt32, int32(0)), true
	case oidInt8:
		return newKind("Int64", parseInt64, int64(0)), true
	case oidOID:
		return newKind("UInt32", parseUint32Of("oid"), uint32(0)), true
	case oidXID:
		return newKind("UInt32", parseUint32Of("xid"), uint32(0)), true
	case oidCID:
		return newKind("UInt32", parseUint32Of("cid"), uint32(0)), true
	case oidXID8:
		return newKind("UInt64", parseXID8, uint64(0)), true
	case oidPgLSN:
		return newKind("UInt64", parsePgLSN, uint64(0)), true
	case oidFloat4:
		return newKind("Float32", parseFloat32, float32(0)), true
	case oidFloat8:
		return newKind("Float64", parseFloat64, float64(0)), true
	case oidNumeric:
		return numericKind(typmod, caps), true
	case oidText, oidVarchar, oidBpchar, oidChar, oidName, oidJSON, oidJSONB:
		return stringKind(), true
	case oidBytea:
		return newKind("String", parseBytea, ""), true
	case oidBool:
		if caps.Bool {
			return newKind("Bool", parseBool, false), true
		}
		return newKind("UInt8", parseBoolUint8, uint8(0)), true
	case oidUUID:
		return newKind("UUID", parseUUID, uuid.UUID{}), true
	}
	switch {
	case textType(oid):
		k = stringKind()
		k.wholeArray = oid == oidBox // box arrays are delimited by ';'
		return k, true
	case textExtensionType(name):
		k = stringKind()
		k.wholeArray = true // PostGIS arrays are delimited by ':'
		return k, true
	}
	return temporalKind(oid, caps)
}

// temporalKind maps date, time and timestamps.
func temporalKind(oid uint32, caps Capabilities) (k kind, ok bool) {
	switch oid {
	case oidDate:
		if caps.Date32 {
			return newKind("Date32", parseDate32, epoch()), true
		}
		return newKind("Int32", parseDateDays, int32(0)), true
	case oidTimestamp, oidTimestamptz:
		if caps.DateTime64 {
			k := newKind("DateTime64(6, 'UTC')", parseDateTime64, epoch())
			k.typed = newMicrosBuilder
			return k, true
		}
		return newKind("Int64", parseTimestampMicros, int64(0)), true
	case oidTime:
		return newKind("Int64", parseTimeMicros, int64(0)), true
	}
	return kind{}, false
}

// numericKind maps numeric(p, s) to Decimal(p, s) when ClickHouse can hold
// every value of it (p up to 38, or 76 with Decimal256), else to String in
// PostgreSQL's exact text form.
func numericKind(typmod int32, caps Capabilities) kind {
	p, s, ok := numericTypmod(typmod)
	widest := maxDecimal128
	if caps.Decimal256 {
		widest = maxDecimal256
	}
	if !ok || p > widest || s < 0 || s > p {
		k := stringKind()
		k.bin = binText(appendNumericText)
		return k
	}
	chType := "Decimal(" + strconv.Itoa(p) + ", " + strconv.Itoa(s) + ")"
	k := newKind(chType, decimalParser(p, s), decimal.Decimal{})
	if p <= maxScaled {
		k.typed = newScaledBuilder(p, s)
	}
	k.bin = binaryNumeric(p, s)
	return k
}

// numericTypmod decodes numeric's typmod into precision and scale; the
// scale is an 11-bit signed value (negative scales exist since
// PostgreSQL 15). ok is false for an unconstrained numeric.
func numericTypmod(typmod int32) (p, s int, ok bool) {
	if typmod < 4 {
		return 0, 0, false
	}
	v := int(typmod - 4)
	p = (v >> 16) & 0xffff
	s = ((v & 0x7ff) ^ 1024) - 1024
	return p, s, p >= 1
}
