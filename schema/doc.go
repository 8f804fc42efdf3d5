// Package schema maps PostgreSQL tables onto ClickHouse ReplacingMergeTree
// tables and converts PostgreSQL's text output of values (pgoutput in text
// format, COPY/SELECT in text) into the Go values clickhouse-go appends.
//
// The package is pure: no network, no database, no state. Everything it
// decides comes from a Table (read from the catalog by the caller) and the
// server's Capabilities.
//
// # Guarantee
//
// Conversion is lossless or it fails: no digit, microsecond or byte of a
// value changes on its way to ClickHouse. A value the chosen ClickHouse type
// can't hold exactly is an error (wrapping ErrUnrepresentable) that names
// the fix, --text-columns <schema>.<table>.<column>, which makes the column
// a String holding PostgreSQL's text form. Date and DateTime are never used
// for data: ClickHouse silently wraps values out of their range and drops
// microseconds.
//
// # Type mapping
//
//	PostgreSQL              ClickHouse                    Go value from Convert
//	int2, int4, int8        Int16, Int32, Int64           int16, int32, int64
//	oid                     UInt32                        uint32
//	float4, float8          Float32, Float64              float32, float64 (NaN, ±Infinity kept)
//	numeric(p,s), p <= 38   Decimal(p, s)                 decimal.Decimal (NaN, ±Infinity: error)
//	other numeric           String                        string, PostgreSQL's exact text
//	text, varchar, bpchar,  String                        string, the exact bytes (bpchar
//	"char", name, json(b)                                 keeps its padding)
//	bytea                   String                        string of the raw bytes
//	bool                    Bool (21.12+), else UInt8     bool, else uint8
//	uuid                    UUID                          uuid.UUID
//	date                    Date32 (21.9+), else Int32    time.Time at UTC midnight, else int32
//	                                                      days since 1970-01-01
//	timestamp(tz)           DateTime64(6, 'UTC') (20.1+), time.Time in UTC, else int64
//	                        else Int64                    microseconds since 1970-01-01 UTC
//	time                    Int64                         int64 microseconds since midnight
//	enum                    LowCardinality(String)        string
//	                        (19.9+), else String
//	anything else           String, Fallback set          string, PostgreSQL's text form
//
// "other numeric" is an unconstrained numeric, a precision above 38, or a
// negative scale or one above the precision (PostgreSQL 15). A column named
// in --text-columns (Column.Text) is String whatever its type.
//
// Date32 and DateTime64 hold 1900-01-01 to 2299-12-31; other dates and
// timestamps (and infinity) are errors with the fix. The integer forms used
// on old servers hold every finite PostgreSQL date (4714 BC included) and
// every timestamp up to 294247-01-10 04:00:54.775807 UTC, where int64
// microseconds since 1970 end (PostgreSQL goes on to 294276 AD), exactly;
// infinity and later timestamps are errors with the fix there.
//
// # Nullability
//
// A column is Nullable(T) unless it is NOT NULL or part of the key: key
// columns never are, because ClickHouse can't sort by a Nullable column, so
// NULL in a key column is an error.
//
// # Arrays
//
// Only one-dimensional arrays with default bounds map natively. ClickHouse
// has no Nullable(Array), and turning a NULL array into an empty one would
// change data, so:
//
//   - a NOT NULL array column is Array(Nullable(T)) of its element
//     mapping (an enum element is String) and Convert gives []*T, nil for a
//     NULL element;
//   - a nullable array column is Nullable(String) holding PostgreSQL's
//     array text, such as {1,2,NULL}; a key array column (REPLICA
//     IDENTITY FULL) is String of the same text, as ClickHouse can't sort
//     by an array of Nullable;
//   - an array of an element type without a mapping is a fallback String.
//
// A multi-dimensional array or one with custom bounds in an
// Array(Nullable(T)) column is an error with the fix.
//
// # Names
//
// Tables of schema public keep their name in ClickHouse; others are named
// <schema>__<table> (CHTableName). Columns keep their PostgreSQL name.
// QuotePG, QuoteCH and QuoteCHString quote any string safely.
//
// # Comparing values
//
// Literal writes a converted value as a ClickHouse literal for key lookups;
// Canonical gives a text under which a value converted from PostgreSQL and
// the same value scanned back from ClickHouse are equal, for verification.
package schema
