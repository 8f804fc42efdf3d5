package kafka

import (
	"encoding/json"
	"math"
	"testing"
	"time"

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
