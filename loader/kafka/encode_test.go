package kafka

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/schema"
	"github.com/shopspring/decimal"
)

// Golden values: ferry's encoding of one value next to the one the Debezium
// PostgreSQL connector documents for the type and mode, in
// debezium/debezium documentation/modules/ROOT/pages/connectors/postgresql.adoc
// at 6c5b02b0bd0dccd2a92cdc006e286759f82fdbb7 ("Data type mappings": basic,
// temporal (adaptive, connect), decimal types; arrays as Connect ARRAY of
// the element's type). Each must also read back to PostgreSQL's text.
func TestDebeziumValueEncodings(t *testing.T) {
	day := int32(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	us := time.Date(2024, 5, 1, 12, 0, 0, 123456000, time.UTC).UnixMicro()
	adaptive := codec{decimal: DecimalPrecise, time: TimeAdaptive}
	connect := codec{decimal: DecimalString, time: TimeConnect}
	iso := codec{decimal: DecimalDouble, time: TimeISOString}
	one := int32(1)
	cases := []struct {
		name string
		c    column
		cd   codec
		v    any
		want string // Debezium's
		text string // PostgreSQL's text read back
	}{
		{"int8 above 2^53: INT64, a JSON number", column{kind: kindInt}, adaptive, int64(math.MaxInt64), "9223372036854775807", "9223372036854775807"},
		{"numeric(10,2) precise: Decimal, unscaled bytes in base64", column{kind: kindDecimal, prec: 2}, adaptive, decimal.RequireFromString("1.50"), `"AJY="`, "1.50"},
		{"numeric(10,2) negative precise", column{kind: kindDecimal, prec: 2}, adaptive, decimal.RequireFromString("-0.01"), `"/w=="`, "-0.01"},
		{"numeric(10,2) string", column{kind: kindDecimal, prec: 2}, connect, decimal.RequireFromString("1.5"), `"1.50"`, "1.50"},
		{"numeric(10,2) double", column{kind: kindDecimal, prec: 2}, iso, decimal.RequireFromString("1.5"), `1.5`, "1.5"},
		{"numeric precise: VariableScaleDecimal", column{kind: kindNumeric}, adaptive, "123.456", `{"scale":3,"value":"AeJA"}`, "123.456"},
		{"date adaptive: io.debezium.time.Date, days", column{kind: kindDate}, adaptive, day, "19844", "2024-05-01"},
		{"date connect: Connect Date, days", column{kind: kindDate}, connect, day, "19844", "2024-05-01"},
		{"date isostring", column{kind: kindDate}, iso, day, `"2024-05-01"`, "2024-05-01"},
		{"timestamp(6) adaptive: MicroTimestamp", column{kind: kindTimestamp, prec: 6}, adaptive, us, "1714564800123456", "2024-05-01 12:00:00.123456"},
		{"timestamp(3) adaptive: Timestamp, ms", column{kind: kindTimestamp, prec: 3}, adaptive, us - 456, "1714564800123", "2024-05-01 12:00:00.123000"},
		{"timestamp connect: Connect Timestamp, ms (lossy)", column{kind: kindTimestamp, prec: 6}, connect, us, "1714564800123", "2024-05-01 12:00:00.123000"},
		{"timestamptz: ZonedTimestamp in UTC", column{kind: kindTimestampTZ, prec: 6}, adaptive, us, `"2024-05-01T12:00:00.123456Z"`, "2024-05-01 12:00:00.123456+00"},
		{"timestamptz whole second", column{kind: kindTimestampTZ, prec: 6}, adaptive, us - 123456, `"2024-05-01T12:00:00Z"`, "2024-05-01 12:00:00.000000+00"},
		{"time(6) adaptive: MicroTime", column{kind: kindTime, prec: 6}, adaptive, int64(16), "16", "00:00:00.000016"},
		{"time connect: Connect Time, ms", column{kind: kindTime, prec: 6}, connect, int64(3_000_000), "3000", "00:00:03.000000"},
		{"int4[] with NULL: ARRAY of INT32", column{kind: kindInt, array: true}, adaptive, []*int32{&one, nil}, "[1,null]", `{"1",NULL}`},
		{"bytea: BYTES, base64", column{kind: kindBytea}, adaptive, "\x00\xff", `"AP8="`, `\x00ff`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := appendEvent(nil, tc.c, tc.cd, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("ferry %s, Debezium %s", got, tc.want)
			}
			text, null, err := eventText(tc.c, tc.cd, json.RawMessage(got))
			if err != nil || null || string(text) != tc.text {
				t.Fatalf("read back %q (null %v, %v), want %q", text, null, err, tc.text)
			}
		})
	}
}

// textArrayColumn is the wire column of a nullable one-dimensional array
// of the given element type, which ferry holds as PostgreSQL's array text.
func textArrayColumn(t *testing.T, elemOID uint32, typmod int32) column {
	t.Helper()
	tm, err := schema.Map(schema.Table{Schema: "s", Name: "t", Columns: []schema.Column{
		{Name: "id", TypeOID: 23, TypeMod: -1, Key: true},
		{Name: "a", TypeOID: 1, TypeMod: typmod, ElemOID: elemOID, Dims: 1},
	}}, schema.Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	c := wireColumns(tm)[1]
	if !c.textArray {
		t.Fatalf("element %d: not an array held as text", elemOID)
	}
	return c
}

// Arrays held as PostgreSQL's array text (nullable and key arrays) go as
// Debezium sends arrays, a JSON array of the element's encoding with null
// for NULL elements (postgresql.adoc at the commit above: "ARRAY" of the
// element's mapping), and read back to array_out's exact text. The texts
// are what PostgreSQL 15 prints (TimeZone UTC).
func TestDebeziumArrayEncodings(t *testing.T) {
	adaptive := codec{decimal: DecimalPrecise, time: TimeAdaptive}
	connect := codec{decimal: DecimalString, time: TimeConnect}
	iso := codec{decimal: DecimalDouble, time: TimeISOString}
	numeric52 := int32(5<<16 | 2 + 4)
	cases := []struct {
		name    string
		elemOID uint32
		typmod  int32
		cd      codec
		text    string
		want    string
	}{
		{"int4[] with NULL", 23, -1, adaptive, `{1,NULL,-3}`, `[1,null,-3]`},
		{"empty", 23, -1, adaptive, `{}`, `[]`},
		{"int8[] above 2^53", 20, -1, adaptive, `{9223372036854775807}`, `[9223372036854775807]`},
		{"text[]: quotes, commas, backslashes, unicode, the string NULL, empty", 25, -1, adaptive,
			`{"a \"b\"",NULL,"NULL","c,d","e\\f",ü€,"","x y","{}"}`,
			`["a \"b\"",null,"NULL","c,d","e\\f","ü€","","x y","{}"]`},
		{"numeric(5,2)[] precise", 1700, numeric52, adaptive, `{1.50,NULL,-0.01}`, `["AJY=",null,"/w=="]`},
		{"numeric(5,2)[] string", 1700, numeric52, connect, `{1.50,NULL,-0.01}`, `["1.50",null,"-0.01"]`},
		{"numeric(5,2)[] double", 1700, numeric52, iso, `{1.50,NULL,-0.01}`, `[1.5,null,-0.01]`},
		{"numeric[] precise: VariableScaleDecimal", 1700, -1, adaptive, `{123.456,NaN}`, `[{"scale":3,"value":"AeJA"},"NaN"]`},
		{"float8[]", 701, -1, adaptive, `{1.5,1e+20,NaN,-Infinity,1e-05,100000}`, `[1.5,1e+20,"NaN","-Infinity",1e-05,100000]`},
		{"bool[]", 16, -1, adaptive, `{t,f,NULL}`, `[true,false,null]`},
		{"uuid[]", 2950, -1, adaptive, `{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}`, `["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]`},
		{"bytea[]", 17, -1, adaptive, `{"\\x00ff"}`, `["AP8="]`},
		{"date[] adaptive: days", 1082, -1, adaptive, `{2024-05-01,infinity,"0044-03-15 BC"}`, `[19844,2147483647,-735160]`},
		{"date[] isostring", 1082, -1, iso, `{2024-05-01,"0044-03-15 BC"}`, `["2024-05-01","-0043-03-15"]`},
		{"timestamptz[]: ZonedTimestamp", 1184, -1, adaptive,
			`{"2024-05-01 12:00:00.5+00","2024-05-01 12:00:00+00","0044-03-15 12:00:00+00 BC"}`,
			`["2024-05-01T12:00:00.5Z","2024-05-01T12:00:00Z","-0043-03-15T12:00:00Z"]`},
		{"timestamp[] adaptive: MicroTimestamp", 1114, -1, adaptive, `{"2024-05-01 12:00:00.123456","2024-05-01 12:00:00"}`, `[1714564800123456,1714564800000000]`},
		{"time[] adaptive: MicroTime", 1083, -1, adaptive, `{12:00:00.5,24:00:00}`, `[43200500000,86400000000]`},
		{"two dimensions: the text", 23, -1, adaptive, `{{1,2},{3,4}}`, `"{{1,2},{3,4}}"`},
		{"custom bounds: the text", 23, -1, adaptive, `[0:1]={1,2}`, `"[0:1]={1,2}"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := textArrayColumn(t, tc.elemOID, tc.typmod)
			got, err := appendEvent(nil, c, tc.cd, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("ferry %s, Debezium %s", got, tc.want)
			}
			text, null, err := eventText(c, tc.cd, json.RawMessage(got))
			if err != nil || null || string(text) != tc.text {
				t.Fatalf("read back %q (null %v, %v), want %q", text, null, err, tc.text)
			}
			// The legacy form and what ferry sent before keep the text.
			legacy, err := appendEvent(nil, c, codec{legacy: true}, tc.text)
			if err != nil || string(legacy) != string(mustJSON(tc.text)) {
				t.Fatalf("legacy %s (%v)", legacy, err)
			}
			for _, cd := range []codec{{legacy: true}, tc.cd} {
				if text, _, err := eventText(c, cd, legacy); err != nil || string(text) != tc.text {
					t.Fatalf("old form read back %q (%v)", text, err)
				}
			}
		})
	}
	c := textArrayColumn(t, 23, -1)
	if got, err := appendEvent(nil, c, adaptive, nil); err != nil || string(got) != "null" {
		t.Fatalf("NULL array: %s (%v)", got, err)
	}
	if _, null, err := eventText(c, adaptive, json.RawMessage("null")); err != nil || !null {
		t.Fatalf("NULL array read back: null %v (%v)", null, err)
	}
	f, err := json.Marshal(columnSchema(c, codec{decimal: DecimalPrecise, time: TimeAdaptive, schemas: true}))
	if err != nil || string(f) != `{"type":"array","items":{"type":"int32","optional":true},"optional":true}` {
		t.Fatalf("Connect schema %s (%v)", f, err)
	}
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
