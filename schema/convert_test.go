package schema

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// convertCase is one Convert call on a single-column table public.t.
type convertCase struct {
	name    string
	col     Column
	text    string
	null    bool
	want    any
	wantErr string // substring of the error; "" for success
}

// runConvertCases maps each case's column under caps and checks Convert.
func runConvertCases(t *testing.T, caps Capabilities, tests []convertCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.col.Name = "c"
			m, err := Map(Table{Schema: "public", Name: "t", Columns: []Column{tt.col}, AppendOnly: true}, caps)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Columns[0].Convert([]byte(tt.text), tt.null)
			checkConverted(t, got, err, tt.want, tt.wantErr)
			checkBuilder(t, tt.col, caps, tt.text, tt.null)
			if !tt.col.NotNull {
				c := tt.col
				c.NotNull = true
				checkBuilder(t, c, caps, tt.text, tt.null)
			}
		})
	}
}

// checkBuilder checks that a ColumnBuilder of col converts text as Convert
// does: the same value of the same Go type, or the same error; a builder
// of a scalar column of ferry's own mapping is typed, Nullable or not.
func checkBuilder(t *testing.T, col Column, caps Capabilities, text string, null bool) {
	t.Helper()
	m, err := Map(Table{Schema: "public", Name: "t", Columns: []Column{col}, AppendOnly: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	cm := m.Columns[0]
	want, wantErr := cm.Convert([]byte(text), null)
	b := cm.NewBuilder()
	b.AppendZero()
	err = b.Append([]byte(text), null)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("builder (NOT NULL %v): err = %v, Convert's = %v", col.NotNull, err, wantErr)
	}
	typed, isTyped := b.Typed()
	if wantTyped := cm.typed != nil; isTyped != wantTyped {
		t.Fatalf("builder of %s (NOT NULL %v): typed %v, want %v", cm.Type, col.NotNull, isTyped, wantTyped)
	}
	if isTyped && reflect.ValueOf(typed).Len() != b.Len() {
		t.Fatalf("typed slice holds %d values, builder %d", reflect.ValueOf(typed).Len(), b.Len())
	}
	if z := b.Value(0); fmt.Sprintf("%T", z) != fmt.Sprintf("%T", cm.Zero()) || !reflect.DeepEqual(z, cm.Zero()) {
		t.Fatalf("builder's zero %T %#v, Zero() %T %#v", z, z, cm.Zero(), cm.Zero())
	}
	if wantErr != nil {
		if b.Len() != 1 {
			t.Fatalf("builder kept a value it refused: %d values", b.Len())
		}
		return
	}
	got := b.Value(1)
	if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) || Canonical(got) != Canonical(want) {
		t.Fatalf("builder (NOT NULL %v): %T %s, Convert: %T %s", col.NotNull, got, Canonical(got), want, Canonical(want))
	}
	if tg, ok := got.(time.Time); ok && tg.Location() != want.(time.Time).Location() {
		t.Fatalf("builder's time in %v, Convert's in %v", tg.Location(), want.(time.Time).Location())
	}
	b.Reset()
	if b.Len() != 0 {
		t.Fatalf("Reset left %d values", b.Len())
	}
}

// checkConverted compares a conversion result by Go type and canonical
// text, and errors by substring.
func checkConverted(t *testing.T, got any, err error, want any, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want it to contain %q (value %#v)", err, wantErr, got)
		}
		if !strings.HasPrefix(err.Error(), `column "c": `) {
			t.Errorf("error %q does not start with the column name", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) || Canonical(got) != Canonical(want) {
		t.Fatalf("got %T %s, want %T %s", got, Canonical(got), want, Canonical(want))
	}
	if tm, ok := got.(time.Time); ok && tm.Location() != time.UTC {
		t.Errorf("time in %v, want UTC", tm.Location())
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

const textFix = "fix: --text-columns public.t.c"

func TestConvertNumbers(t *testing.T) {
	nn := func(oid uint32) Column { return Column{TypeOID: oid, NotNull: true} }
	num := func(p, s int) Column { return Column{TypeOID: 1700, TypeMod: numericMod(p, s), NotNull: true} }
	runConvertCases(t, CapabilitiesFor(24, 8), []convertCase{
		{name: "int2 min", col: nn(21), text: "-32768", want: int16(math.MinInt16)},
		{name: "int2 max", col: nn(21), text: "32767", want: int16(math.MaxInt16)},
		{name: "int2 overflow", col: nn(21), text: "32768", wantErr: `invalid int2 value "32768"`},
		{name: "int4 min", col: nn(23), text: "-2147483648", want: int32(math.MinInt32)},
		{name: "int4 max", col: nn(23), text: "2147483647", want: int32(math.MaxInt32)},
		{name: "int8 min", col: nn(20), text: "-9223372036854775808", want: int64(math.MinInt64)},
		{name: "int8 max", col: nn(20), text: "9223372036854775807", want: int64(math.MaxInt64)},
		{name: "int8 garbage", col: nn(20), text: "12a", wantErr: `invalid int8 value "12a"`},
		{name: "oid max", col: nn(26), text: "4294967295", want: uint32(math.MaxUint32)},
		{name: "oid negative", col: nn(26), text: "-1", wantErr: "invalid oid"},
		{name: "float4 max", col: nn(700), text: "3.4028235e+38", want: float32(math.MaxFloat32)},
		{name: "float4 denormal", col: nn(700), text: "1e-45", want: float32(math.SmallestNonzeroFloat32)},
		{name: "float4 NaN", col: nn(700), text: "NaN", want: float32(math.NaN())},
		{name: "float4 -Infinity", col: nn(700), text: "-Infinity", want: float32(math.Inf(-1))},
		{name: "float8 Infinity", col: nn(701), text: "Infinity", want: math.Inf(1)},
		{name: "float8 NaN", col: nn(701), text: "NaN", want: math.NaN()},
		{name: "float8 max", col: nn(701), text: "1.7976931348623157e+308", want: math.MaxFloat64},
		{name: "float8 tiny", col: nn(701), text: "5e-324", want: math.SmallestNonzeroFloat64},
		{name: "float8 shortest", col: nn(701), text: "0.1", want: 0.1},
		{name: "float8 negative zero", col: nn(701), text: "-0", want: math.Copysign(0, -1)},
		{name: "decimal", col: num(10, 2), text: "12345678.90", want: dec("12345678.90")},
		{name: "decimal negative zero", col: num(10, 2), text: "-0.00", want: dec("0")},
		{name: "decimal 38 digits", col: num(38, 0), text: "12345678901234567890123456789012345678", want: dec("12345678901234567890123456789012345678")},
		{name: "decimal -38 digits", col: num(38, 0), text: "-99999999999999999999999999999999999999", want: dec("-99999999999999999999999999999999999999")},
		{name: "decimal 38,38", col: num(38, 38), text: "0.12345678901234567890123456789012345678", want: dec("0.12345678901234567890123456789012345678")},
		{name: "decimal too many digits", col: num(38, 0), text: "123456789012345678901234567890123456789", wantErr: "Decimal(38, 0) can't hold"},
		{name: "decimal too many integer digits", col: num(5, 2), text: "1234.00", wantErr: "Decimal(5, 2) can't hold \"1234.00\": value not representable; " + textFix},
		{name: "decimal too many fraction digits", col: num(5, 2), text: "1.234", wantErr: "can't hold"},
		{name: "decimal extra zero digits", col: num(5, 2), text: "1.2300", want: dec("1.23")},
		{name: "decimal NaN", col: num(10, 2), text: "NaN", wantErr: `Decimal(10, 2) can't hold "NaN": value not representable; ` + textFix},
		{name: "decimal Infinity", col: num(10, 2), text: "Infinity", wantErr: textFix},
		{name: "decimal -Infinity", col: num(10, 2), text: "-Infinity", wantErr: textFix},
		{name: "decimal garbage", col: num(10, 2), text: "1.2.3", wantErr: "invalid numeric"},
		{name: "decimal 18 digits", col: num(18, 0), text: "999999999999999999", want: dec("999999999999999999")},
		{name: "decimal -18 digits", col: num(18, 4), text: "-99999999999999.9999", want: dec("-99999999999999.9999")},
		{name: "decimal 18,18", col: num(18, 18), text: "-0.123456789012345678", want: dec("-0.123456789012345678")},
		{name: "decimal 19 digits", col: num(18, 0), text: "1000000000000000000", wantErr: "Decimal(18, 0) can't hold"},
		{name: "decimal 9,9", col: num(9, 9), text: "0.999999999", want: dec("0.999999999")},
		{name: "decimal plus sign", col: num(4, 0), text: "+7", want: dec("7")},
		{name: "decimal leading zeros", col: num(5, 2), text: "-000000000000000000000000007.10", want: dec("-7.1")},
		{name: "decimal many trailing zeros", col: num(5, 2), text: "1.50000000000000000000000000", want: dec("1.5")},
		{name: "decimal integer text", col: num(5, 2), text: "12", want: dec("12")},
		{name: "decimal point first", col: num(5, 2), text: ".5", want: dec("0.5")},
		{name: "decimal point last", col: num(5, 2), text: "5.", want: dec("5")},
		{name: "decimal 1,0", col: num(1, 0), text: "-9", want: dec("-9")},
		{name: "numeric unconstrained 50 digits", col: Column{TypeOID: 1700, TypeMod: -1, NotNull: true},
			text: "12345678901234567890123456789012345678901234567890.000", want: "12345678901234567890123456789012345678901234567890.000"},
		{name: "numeric unconstrained NaN", col: Column{TypeOID: 1700, TypeMod: -1, NotNull: true}, text: "NaN", want: "NaN"},
		{name: "numeric(40,2)", col: num(40, 2), text: "1.50", want: dec("1.5")},
		{name: "decimal 76 digits", col: num(76, 20), text: "-" + strings.Repeat("9", 56) + "." + strings.Repeat("9", 20),
			want: dec("-" + strings.Repeat("9", 56) + "." + strings.Repeat("9", 20))},
		{name: "decimal 76,76", col: num(76, 76), text: "0." + strings.Repeat("9", 76), want: dec("0." + strings.Repeat("9", 76))},
		{name: "decimal 77 digits", col: num(76, 0), text: "1" + strings.Repeat("0", 76), wantErr: "Decimal(76, 0) can't hold"},
		{name: "numeric(77,0) as string", col: num(77, 0), text: "1.50", want: "1.50"},
	})
	// Without Decimal256 (18.16), numeric wider than 38 digits is String.
	runConvertCases(t, CapabilitiesFor(18, 16), []convertCase{
		{name: "numeric(40,2) as string", col: num(40, 2), text: "1.50", want: "1.50"},
	})
}

func TestConvertScalars(t *testing.T) {
	nn := func(oid uint32) Column { return Column{TypeOID: oid, NotNull: true} }
	u := uuid.MustParse("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
	runConvertCases(t, CapabilitiesFor(24, 8), []convertCase{
		{name: "text", col: nn(25), text: "héllo\n\tworld", want: "héllo\n\tworld"},
		{name: "text empty", col: nn(25), text: "", want: ""},
		{name: "bpchar padding", col: nn(1042), text: "ab   ", want: "ab   "},
		{name: "varchar", col: nn(1043), text: " x ", want: " x "},
		{name: "jsonb", col: nn(3802), text: `{"a": [1, 2]}`, want: `{"a": [1, 2]}`},
		{name: "bytea", col: nn(17), text: `\x00ff0a41`, want: "\x00\xff\nA"},
		{name: "bytea empty", col: nn(17), text: `\x`, want: ""},
		{name: "bytea bad hex", col: nn(17), text: `\x0g`, wantErr: "invalid bytea"},
		{name: "bytea odd hex", col: nn(17), text: `\x0`, wantErr: "invalid bytea"},
		{name: "bytea escape form", col: nn(17), text: `a\\b\000\377`, want: "a\\b\x00\xff"},
		{name: "bool true", col: nn(16), text: "t", want: true},
		{name: "bool false", col: nn(16), text: "f", want: false},
		{name: "bool garbage", col: nn(16), text: "true", wantErr: "invalid bool"},
		{name: "uuid", col: nn(2950), text: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", want: u},
		{name: "uuid garbage", col: nn(2950), text: "a0eebc99", wantErr: "invalid uuid"},
		{name: "enum", col: Column{TypeOID: 90001, Enum: true}, text: "happy", want: "happy"},
		{name: "fallback interval", col: nn(1186), text: "1 day 02:03:04", want: "1 day 02:03:04"},
		{name: "text override", col: Column{TypeOID: 1700, TypeMod: numericMod(5, 2), Text: true}, text: "NaN", want: "NaN"},
		{name: "NULL nullable", col: Column{TypeOID: 23}, null: true, want: nil},
		{name: "NULL not null", col: nn(23), null: true, wantErr: `column "c": NULL in a NOT NULL column`},
		{name: "NULL key", col: Column{TypeOID: 23, Key: true}, null: true, wantErr: "NULL in a NOT NULL column (it is a key column"},
		{name: "long value truncated", col: nn(23), text: strings.Repeat("9", 100), wantErr: `"` + strings.Repeat("9", 64) + `"...`},
	})
	runConvertCases(t, CapabilitiesFor(18, 16), []convertCase{
		{name: "old bool true", col: nn(16), text: "t", want: uint8(1)},
		{name: "old bool false", col: nn(16), text: "f", want: uint8(0)},
	})
}

func TestConvertErrorIs(t *testing.T) {
	m, err := Map(Table{Schema: "s", Name: "t", Columns: []Column{{Name: "n", TypeOID: 1700, TypeMod: numericMod(5, 2), Key: true}}}, Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, text string
		want       bool
	}{
		{"NaN", "NaN", true},
		{"garbage", "x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Columns[0].Convert([]byte(tt.text), false)
			if err == nil || errors.Is(err, ErrUnrepresentable) != tt.want {
				t.Fatalf("err = %v, want errors.Is(ErrUnrepresentable) = %v", err, tt.want)
			}
		})
	}
}

func TestConvertUnmapped(t *testing.T) {
	tests := []struct {
		name string
		c    ColumnMap
	}{
		{"zero ColumnMap", ColumnMap{Name: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.c.Convert([]byte("1"), false); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestZero(t *testing.T) {
	tests := []struct {
		name string
		col  Column
		caps Capabilities
		want any
	}{
		{"nullable", Column{TypeOID: 23}, Capabilities{}, nil},
		{"int4", Column{TypeOID: 23, NotNull: true}, Capabilities{}, int32(0)},
		{"int2 key", Column{TypeOID: 21, Key: true}, Capabilities{}, int16(0)},
		{"oid", Column{TypeOID: 26, NotNull: true}, Capabilities{}, uint32(0)},
		{"float4", Column{TypeOID: 700, NotNull: true}, Capabilities{}, float32(0)},
		{"text", Column{TypeOID: 25, NotNull: true}, Capabilities{}, ""},
		{"decimal", Column{TypeOID: 1700, TypeMod: numericMod(5, 2), NotNull: true}, Capabilities{}, decimal.Decimal{}},
		{"uuid", Column{TypeOID: 2950, NotNull: true}, Capabilities{}, uuid.UUID{}},
		{"bool new", Column{TypeOID: 16, NotNull: true}, CapabilitiesFor(24, 8), false},
		{"bool old", Column{TypeOID: 16, NotNull: true}, Capabilities{}, uint8(0)},
		{"date32", Column{TypeOID: 1082, NotNull: true}, CapabilitiesFor(24, 8), time.Unix(0, 0).UTC()},
		{"date old", Column{TypeOID: 1082, NotNull: true}, Capabilities{}, int32(0)},
		{"datetime64", Column{TypeOID: 1184, NotNull: true}, CapabilitiesFor(24, 8), time.Unix(0, 0).UTC()},
		{"timestamp old", Column{TypeOID: 1184, NotNull: true}, Capabilities{}, int64(0)},
		{"time", Column{TypeOID: 1083, NotNull: true}, Capabilities{}, int64(0)},
		{"array", Column{TypeOID: 1007, ElemOID: 23, NotNull: true}, Capabilities{}, []*int32{}},
		{"nullable array", Column{TypeOID: 1007, ElemOID: 23}, Capabilities{}, nil},
		{"fallback", Column{TypeOID: 1186, NotNull: true}, Capabilities{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.col.Name = "c"
			m, err := Map(Table{Schema: "public", Name: "t", Columns: []Column{tt.col}, AppendOnly: true}, tt.caps)
			if err != nil {
				t.Fatal(err)
			}
			got := m.Columns[0].Zero()
			if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", tt.want) || Canonical(got) != Canonical(tt.want) {
				t.Errorf("Zero() = %T %s, want %T %s", got, Canonical(got), tt.want, Canonical(tt.want))
			}
			if s, ok := got.([]*int32); ok && s == nil {
				t.Error("Zero() is a nil slice, want an empty one")
			}
		})
	}
}

func BenchmarkConvertInt64(b *testing.B) {
	m, err := Map(Table{Schema: "public", Name: "t", Columns: []Column{{Name: "c", TypeOID: 20, Key: true}}}, Capabilities{})
	if err != nil {
		b.Fatal(err)
	}
	c, text := m.Columns[0], []byte("1234567890123")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Convert(text, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConvertTimestamp(b *testing.B) {
	m, err := Map(Table{Schema: "public", Name: "t", Columns: []Column{{Name: "c", TypeOID: 1184, Key: true}}}, CapabilitiesFor(24, 8))
	if err != nil {
		b.Fatal(err)
	}
	c, text := m.Columns[0], []byte("2024-01-02 03:04:05.123456+00")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Convert(text, false); err != nil {
			b.Fatal(err)
		}
	}
}
