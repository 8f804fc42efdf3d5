package schema

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

func TestLiteral(t *testing.T) {
	u := uuid.MustParse("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
	tests := []struct {
		name    string
		v       any
		want    string
		wantErr string
	}{
		{"nil", nil, "NULL", ""},
		{"nil pointer", (*int32)(nil), "NULL", ""},
		{"int16", int16(-32768), "-32768", ""},
		{"int64 min", int64(math.MinInt64), "-9223372036854775808", ""},
		{"uint32", uint32(math.MaxUint32), "4294967295", ""},
		{"uint64", uint64(math.MaxUint64), "18446744073709551615", ""},
		{"pointer", ptr(int32(7)), "7", ""},
		{"float64", 0.1, "0.1", ""},
		{"float32 widened exactly", float32(0.1), "0.10000000149011612", ""},
		{"float32 denormal", float32(math.SmallestNonzeroFloat32), "1.401298464324817e-45", ""},
		{"nan", math.NaN(), "nan", ""},
		{"inf", math.Inf(1), "inf", ""},
		{"-inf", float32(math.Inf(-1)), "-inf", ""},
		{"decimal", dec("1.50"), "toDecimal128('1.5', 1)", ""},
		{"decimal integer", dec("-100"), "toDecimal128('-100', 0)", ""},
		{"decimal zero", dec("-0.00"), "toDecimal128('0', 0)", ""},
		{"decimal 38 digits", dec("0.12345678901234567890123456789012345678"), "toDecimal128('0.12345678901234567890123456789012345678', 38)", ""},
		{"decimal 39 digits", dec("1.12345678901234567890123456789012345678"), "toDecimal256('1.12345678901234567890123456789012345678', 38)", ""},
		{"decimal 76 digits", dec("-" + strings.Repeat("9", 56) + "." + strings.Repeat("9", 20)),
			"toDecimal256('-" + strings.Repeat("9", 56) + "." + strings.Repeat("9", 20) + "', 20)", ""},
		{"decimal too wide", dec("1" + strings.Repeat("0", 76)), "", "more than 76 digits"},
		{"string", "it's\n", `'it\'s\n'`, ""},
		{"bytes raw", "\x00\xff", `'\0\xff'`, ""},
		{"bool true", true, "1", ""},
		{"bool false", false, "0", ""},
		{"uint8 bool", uint8(1), "1", ""},
		{"time", utc(2024, 1, 2, 3, 4, 5, 123456), "toDateTime64('2024-01-02 03:04:05.123456', 6, 'UTC')", ""},
		{"time other zone", time.Date(2024, 1, 2, 8, 34, 5, 0, time.FixedZone("IST", 19800)), "toDateTime64('2024-01-02 03:04:05', 6, 'UTC')", ""},
		{"uuid", u, "toUUID('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')", ""},
		{"array", []*int32{ptr(int32(1)), nil}, "[1, NULL]", ""},
		{"string array", []*string{ptr("a'b")}, `['a\'b']`, ""},
		{"empty array", []*int64{}, "[]", ""},
		{"unsupported", struct{}{}, "", "no ClickHouse literal"},
		{"unsupported in array", []any{1, struct{}{}}, "", "no ClickHouse literal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Literal(tt.v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Literal = %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Literal = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	u := uuid.MustParse("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"nil", nil, `\N`},
		{"nil pointer", (*string)(nil), `\N`},
		{"string raw", "a\tb", "a\tb"},
		{"bytes raw", []byte("x\x00"), "x\x00"},
		{"int8", int64(-5), "-5"},
		{"uint64", uint64(math.MaxUint64), "18446744073709551615"},
		{"bool", true, "1"},
		{"float32", float32(3.4028235e38), "3.4028235e+38"},
		{"float32 tiny", float32(math.SmallestNonzeroFloat32), "1e-45"},
		{"float64", 0.1, "0.1"},
		{"negative zero", math.Copysign(0, -1), "-0"},
		{"nan", math.NaN(), "nan"},
		{"float32 nan", float32(math.NaN()), "nan"},
		{"inf", math.Inf(1), "inf"},
		{"-inf", math.Inf(-1), "-inf"},
		{"decimal trailing zeros", dec("1.50"), "1.5"},
		{"decimal negative zero", dec("-0.00"), "0"},
		{"decimal small", dec("-0.0012"), "-0.0012"},
		{"decimal positive exponent", decimal.New(15, 3), "15000"},
		{"decimal big", dec("12345678901234567890123456789012345678"), "12345678901234567890123456789012345678"},
		{"time", utc(2024, 1, 2, 3, 4, 5, 120000), "2024-01-02 03:04:05.12"},
		{"time nanoseconds dropped", time.Date(2024, 1, 2, 3, 4, 5, 123456789, time.UTC), "2024-01-02 03:04:05.123456"},
		{"time BC", utc(-43, 3, 15, 0, 0, 0, 0), "-0043-03-15 00:00:00"},
		{"time far", utc(200000, 1, 1, 0, 0, 0, 0), "200000-01-01 00:00:00"},
		{"uuid", u, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{"int array", []*int32{ptr(int32(1)), nil, ptr(int32(-3))}, `[1,\N,-3]`},
		{"string array", []*string{ptr("a,b"), ptr(`\N`), nil, ptr("it's")}, `['a,b','\\N',\N,'it\'s']`},
		{"empty array", []*int32{}, "[]"},
		{"nested", [][]int32{{1}, {}}, "[[1],[]]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Canonical(tt.v); got != tt.want {
				t.Errorf("Canonical = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCanonicalEqual pairs a value Convert produces with the forms
// clickhouse-go may scan the same ClickHouse value into.
func TestCanonicalEqual(t *testing.T) {
	u := uuid.MustParse("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
	ist := time.FixedZone("IST", 19800)
	tests := []struct {
		name      string
		pg, ch    any
		wantEqual bool
	}{
		{"int vs pointer", int32(5), ptr(int32(5)), true},
		{"NULL vs nil pointer", nil, (*int64)(nil), true},
		{"string vs pointer", "x", ptr("x"), true},
		{"decimal scale", dec("1.5"), decimal.New(150, -2), true},
		{"decimal pointer", dec("-2.25"), ptr(dec("-2.250")), true},
		{"time zones", utc(2024, 1, 2, 3, 4, 5, 1), ptr(time.Date(2024, 1, 2, 8, 34, 5, 1000, ist)), true},
		{"bool vs old UInt8", true, uint8(1), true},
		{"uuid vs pointer", u, &u, true},
		{"array vs scanned non-null", []*int32{ptr(int32(1)), ptr(int32(2))}, []int32{1, 2}, true},
		{"array with NULL vs pointer slice", []*string{ptr("a"), nil}, []*string{ptr("a"), nil}, true},
		{"nan vs nan", math.NaN(), math.NaN(), true},
		{"different ints", int32(5), int32(6), false},
		{"NULL vs empty string", nil, "", false},
		{"array split vs joined", []*string{ptr("a,b")}, []string{"a", "b"}, false},
		{"array NULL vs string NULL", []*string{nil}, []string{"NULL"}, false},
		{"time microsecond", utc(2024, 1, 2, 3, 4, 5, 1), utc(2024, 1, 2, 3, 4, 5, 2), false},
		{"decimal digits", dec("1.5"), dec("1.05"), false},
		{"zero vs negative zero float", 0.0, math.Copysign(0, -1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := Canonical(tt.pg), Canonical(tt.ch)
			if (a == b) != tt.wantEqual {
				t.Errorf("Canonical %q vs %q: equal = %v, want %v", a, b, a == b, tt.wantEqual)
			}
		})
	}
}

// TestRowKeyNullEncoding: NULL and the text \N encode apart, except in the
// row keys of a table keyed before that (DistinctNull unset), whose rows in
// ClickHouse carry keys of the old encoding.
func TestRowKeyNullEncoding(t *testing.T) {
	text := `\N`
	if a, b := AppendEncoded(nil, nil), AppendEncoded(nil, text); string(a) == string(b) {
		t.Errorf("NULL and the text \\N both encode as %q", a)
	}
	fresh := Table{FullRow: true, DistinctNull: true}
	if a, b := AppendRowKeyValue(nil, nil, fresh), AppendRowKeyValue(nil, text, fresh); string(a) == string(b) {
		t.Errorf("a new table's row keys: NULL and \\N both encode as %q", a)
	}
	legacy := Table{FullRow: true}
	if got := string(AppendRowKeyValue(nil, nil, legacy)); got != `2:\N` {
		t.Errorf("a table keyed before DistinctNull: NULL encodes as %q, its stored rows' keys used 2:\\N", got)
	}
	for _, v := range []any{text, "x", int64(5), []any{nil, "NULL"}} {
		if a, b := AppendRowKeyValue(nil, v, legacy), AppendRowKeyValue(nil, v, fresh); string(a) != string(b) {
			t.Errorf("%#v: legacy %q, new %q: only NULL's encoding changed", v, a, b)
		}
	}
}
