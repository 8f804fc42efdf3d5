package kafka

import (
	"encoding/json"
	"math"
	"testing"
)

// TestValueRoundTrip checks that every wire value is written as documented
// and read back as PostgreSQL's text of the same value.
func TestValueRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		kind  wireKind
		array bool
		in    any
		json  string
		text  string
	}{
		{"int8 small", kindInt, false, int64(-42), `-42`, "-42"},
		{"int8 beyond 2^53", kindInt, false, int64(math.MaxInt64), `"9223372036854775807"`, "9223372036854775807"},
		{"int8 min", kindInt, false, int64(math.MinInt64), `"-9223372036854775808"`, "-9223372036854775808"},
		{"xid8 beyond 2^53", kindInt, false, uint64(1 << 60), `"1152921504606846976"`, "1152921504606846976"},
		{"float8", kindFloat, false, 0.1, `0.1`, "0.1"},
		{"float4", kindFloat, false, float32(0.1), `0.1`, "0.1"},
		{"float NaN", kindFloat, false, math.NaN(), `"NaN"`, "NaN"},
		{"float -inf", kindFloat, false, math.Inf(-1), `"-Infinity"`, "-Infinity"},
		{"bool", kindBool, false, uint8(1), `true`, "t"},
		{"bytea", kindBytea, false, "\x00\xffa", `"AP9h"`, `\x00ff61`},
		{"text", kindText, false, "a\"b\\c\n", `"a\"b\\c\n"`, "a\"b\\c\n"},
		{"date", kindDate, false, int32(19844), `"2024-05-01"`, "2024-05-01"},
		{"date BC", kindDate, false, int32(-735525), `"-0044-03-15"`, "0045-03-15 BC"},
		{"date year 0", kindDate, false, int32(-719528), `"0000-01-01"`, "0001-01-01 BC"},
		{"date far", kindDate, false, int32(2932897), `"+10000-01-01"`, "10000-01-01"},
		{"date infinity", kindDate, false, int32(math.MaxInt32), `"infinity"`, "infinity"},
		{"timestamp", kindTimestamp, false, int64(1714564800123456), `"2024-05-01T12:00:00.123456"`, "2024-05-01 12:00:00.123456"},
		{"timestamptz", kindTimestampTZ, false, int64(-1), `"1969-12-31T23:59:59.999999Z"`, "1969-12-31 23:59:59.999999+00"},
		{"timestamptz BC", kindTimestampTZ, false, int64(-62198755200000000), `"-0001-01-01T00:00:00.000000Z"`, "0002-01-01 00:00:00.000000+00 BC"},
		{"timestamp -infinity", kindTimestamp, false, int64(math.MinInt64), `"-infinity"`, "-infinity"},
		{"time 24:00", kindTime, false, int64(86400e6), `"24:00:00.000000"`, "24:00:00.000000"},
		{"pg_lsn", kindLSN, false, uint64(0x16_B374D848), `"16/B374D848"`, "16/B374D848"},
		{"array", kindInt, true, []*int32{ptr(int32(1)), nil, ptr(int32(-3))}, `[1,null,-3]`, `{"1",NULL,"-3"}`},
		{"text array", kindText, true, []*string{ptr(`a"b`), ptr("NULL")}, `["a\"b","NULL"]`, `{"a\"b","NULL"}`},
		{"null", kindInt, false, nil, `null`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := appendValue(nil, tt.kind, tt.array, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.json {
				t.Fatalf("JSON %s, want %s", b, tt.json)
			}
			if !json.Valid(b) {
				t.Fatalf("invalid JSON %s", b)
			}
			text, null, err := pgText(tt.kind, tt.array, b)
			if err != nil {
				t.Fatal(err)
			}
			if null != (tt.in == nil) || string(text) != tt.text {
				t.Fatalf("text %q (null %v), want %q", text, null, tt.text)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
