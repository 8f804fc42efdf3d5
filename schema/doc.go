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
//	oid, xid, cid           UInt32                        uint32
//	xid8                    UInt64                        uint64
//	pg_lsn                  UInt64                        uint64, the WAL position X<<32 | Y
//	                                                      of "X/Y" (ordered as in PostgreSQL)
//	float4, float8          Float32, Float64              float32, float64 (NaN, ±Infinity kept)
//	numeric(p,s), p <= 38   Decimal(p, s)                 decimal.Decimal (NaN, ±Infinity: error)
//	numeric(p,s), p <= 76   Decimal(p, s) (Decimal256,    decimal.Decimal
//	                        22.8+), else String           string, PostgreSQL's exact text
//	other numeric           String                        string, PostgreSQL's exact text
//	text, varchar, bpchar,  String                        string, the exact bytes (bpchar
//	"char", name, json(b)                                 keeps its padding)
//	json(b), NativeJSON     JSON (25.3+; not key columns  JSON, the text (CheckJSON refuses
//	                        or arrays), else String       what the type would alter)
//	bytea                   String                        string of the raw bytes
//	bool                    Bool (21.12+), else UInt8     bool, else uint8
//	uuid                    UUID                          uuid.UUID
//	date                    Date32 (22.8+), else Int32    time.Time at UTC midnight, else int32
//	                                                      days since 1970-01-01
//	timestamp(tz)           DateTime64(6, 'UTC') (22.8+), time.Time in UTC, else int64
//	                        else Int64                    microseconds since 1970-01-01 UTC
//	time                    Int64                         int64 microseconds since midnight
//	enum                    LowCardinality(String)        string
//	                        (19.9+), else String
//	text-form types         String                        string, PostgreSQL's text form
//	anything else           String, Fallback set          string, PostgreSQL's text form
//
// "other numeric" is an unconstrained numeric, a precision above 76 (38
// without Decimal256), or a negative scale or one above the precision
// (PostgreSQL 15). A column named
// in --text-columns (Column.Text) is String whatever its type.
//
// The text-form types are those ClickHouse has no type for that holds every
// value exactly, so String of PostgreSQL's text form is their mapping on
// every server, without the fallback warning: interval (IntervalStyle
// postgres), timetz, inet, cidr, macaddr, macaddr8, money (formatted by the
// server's lc_monetary), bit, varbit, tsvector, tsquery, xml, jsonpath, the
// range and multirange types, the geometric types (point, line, lseg, box,
// path, polygon, circle; coordinates exact with extra_float_digits=3),
// txid_snapshot, pg_snapshot, tid, and the reg* types (regclass, regtype,
// ...; their text is the object's name). ClickHouse's IPv4/IPv6 lose an
// inet's netmask, its Geo types lose PostGIS's SRID and Z/M, and its Map
// can't be Nullable, so none of them is used.
//
// Extension types have no fixed OID and are recognised by name
// (Column.TypeBaseName): citext, hstore ("k"=>"v" pairs) and PostGIS
// geometry and geography, which PostgreSQL prints as hex EWKB (SRID
// included), so String of that text is lossless. A type of one of those
// names that isn't the extension's is still lossless as String.
//
// Date32 and DateTime64 hold 1900-01-01 to 2299-12-31 from ClickHouse 22.8
// (before, 1925 to 2283, clamping other values silently, so ferry uses the
// integer forms there); other dates and timestamps, and infinity, are
// errors with the fix. Every microsecond of that range arrives exact
// (checked on 26.7): the ClickHouse loader carries values past
// clickhouse-go's nanoseconds since 1970, which end in 2262, as Int64
// microseconds. The integer forms used on older servers hold every
// PostgreSQL date and timestamp exactly, infinity included: math.MaxInt32
// and math.MinInt32 are date's infinity and -infinity, math.MaxInt64 and
// math.MinInt64 timestamp's, as inside PostgreSQL, so they sort after and
// before every finite value. No finite value maps to them: finite dates lie
// far inside int32, and timestamps from 294247-01-10 04:00:54.775807 UTC
// (where int64 microseconds since 1970 end; PostgreSQL goes on to 294276
// AD) are errors with the fix. So old servers store infinity and modern ones
// refuse it: a Date32 or DateTime64 column has no value to spare for it, and
// the modern types are what ClickHouse users query; a table with infinite
// or out-of-range values needs --text-columns there.
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
//     mapping (an enum element is String; a domain element maps as its
//     base type, which the caller resolves in Column) and Convert gives
//     []*T, nil for a NULL element;
//   - a nullable array column is Nullable(String) holding PostgreSQL's
//     array text, such as {1,2,NULL}; a key array column (REPLICA
//     IDENTITY FULL) is String of the same text, as ClickHouse can't sort
//     by an array of Nullable;
//   - a column declared with more than one dimension (Column.Dims, from
//     attndims: int[][]) is String or Nullable(String) of the array text;
//   - an array of box (whose array delimiter is ';') or of an extension type
//     (whose delimiter ferry can't know; PostGIS uses ':') is String of the
//     array text too;
//   - an array of an element type without a mapping is a fallback String.
//
// PostgreSQL doesn't enforce declared dimensions, so a multi-dimensional
// array or one with custom bounds in an Array(Nullable(T)) column (declared
// one-dimensional, or with no declared dimensions) is an error with the fix.
//
// # JSON
//
// With Table.NativeJSON, json and jsonb columns that are neither key
// columns nor arrays are ClickHouse JSON where the server has it. The type
// keeps a JSON value, not its text, and alters some values (drops null
// members, splits dotted keys, rounds numbers to Float64, ...): CheckJSON
// refuses those with ErrUnrepresentable, so that what ClickHouse gives back
// is the same JSON value, which CanonicalJSON (and Canonical of a JSON)
// writes alike for both sides.
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
