package schema

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

func ptr[T any](v T) *T { return &v }

func TestConvertArrays(t *testing.T) {
	arr := func(elem uint32) Column { return Column{TypeOID: 1, ElemOID: elem, NotNull: true} }
	u := uuid.MustParse("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
	runConvertCases(t, CapabilitiesFor(24, 8), []convertCase{
		{name: "empty", col: arr(23), text: "{}", want: []*int32{}},
		{name: "ints with NULL", col: arr(23), text: "{1,2,NULL}", want: []*int32{ptr(int32(1)), ptr(int32(2)), nil}},
		{name: "whitespace", col: arr(23), text: "{ 1 , 2 }", want: []*int32{ptr(int32(1)), ptr(int32(2))}},
		{name: "lower-case null", col: arr(23), text: "{null}", want: []*int32{nil}},
		{name: "strings", col: arr(25), text: `{"a b","c\"d",NULL,"NULL",e\,f,"",\ g\ }`,
			want: []*string{ptr("a b"), ptr(`c"d`), nil, ptr("NULL"), ptr("e,f"), ptr(""), ptr(" g ")}},
		{name: "backslash", col: arr(25), text: `{"a\\b",x\\y}`, want: []*string{ptr(`a\b`), ptr(`x\y`)}},
		{name: "braces quoted", col: arr(25), text: `{"{}","a,b"}`, want: []*string{ptr("{}"), ptr("a,b")}},
		{name: "unicode", col: arr(25), text: `{ü,表}`, want: []*string{ptr("ü"), ptr("表")}},
		// array_out quotes only ASCII whitespace: other spaces come bare,
		// and are the element (found by ferry torture).
		{name: "no-break space alone", col: arr(25), text: "{\u00a0}", want: []*string{ptr("\u00a0")}},
		{name: "ideographic space alone", col: arr(25), text: "{\u3000}", want: []*string{ptr("\u3000")}},
		{name: "next line alone", col: arr(25), text: "{\u0085\u0085}", want: []*string{ptr("\u0085\u0085")}},
		{name: "decimals", col: Column{TypeOID: 1, ElemOID: 1700, TypeMod: numericMod(5, 2), NotNull: true}, text: "{1.50,NULL,-2.25}",
			want: []*decimal.Decimal{ptr(dec("1.5")), nil, ptr(dec("-2.25"))}},
		{name: "decimal NaN", col: Column{TypeOID: 1, ElemOID: 1700, TypeMod: numericMod(5, 2), NotNull: true}, text: "{1,NaN}",
			wantErr: "array element 2: Decimal(5, 2) can't hold \"NaN\": value not representable; " + textFix},
		{name: "timestamps", col: arr(1184), text: `{"2024-01-02 03:04:05.5+00",NULL}`, want: []*time.Time{ptr(utc(2024, 1, 2, 3, 4, 5, 500000)), nil}},
		{name: "uuids", col: arr(2950), text: "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", want: []*uuid.UUID{&u}},
		{name: "bools", col: arr(16), text: "{t,f,NULL}", want: []*bool{ptr(true), ptr(false), nil}},
		{name: "floats", col: arr(701), text: "{NaN,-Infinity,1.5}", want: []*float64{ptr(nan()), ptr(negInf()), ptr(1.5)}},
		{name: "bytea", col: arr(17), text: `{"\\x00ff",NULL}`, want: []*string{ptr("\x00\xff"), nil}},
		{name: "bpchar padding", col: arr(1042), text: `{"a  ",b}`, want: []*string{ptr("a  "), ptr("b")}},
		{name: "enum", col: Column{TypeOID: 1, ElemOID: 9, Enum: true, NotNull: true}, text: "{sad,happy}", want: []*string{ptr("sad"), ptr("happy")}},
		{name: "multi-dimensional", col: arr(23), text: "{{1,2},{3,4}}", wantErr: "only one-dimensional arrays with default bounds fit Array: value not representable; " + textFix},
		{name: "custom bounds", col: arr(23), text: "[0:1]={1,2}", wantErr: textFix},
		{name: "bad element", col: arr(23), text: "{1,x}", wantErr: `array element 2: invalid int4 value "x"`},
		{name: "trailing comma", col: arr(23), text: "{1,}", wantErr: "invalid array"},
		{name: "leading comma", col: arr(23), text: "{,1}", wantErr: "invalid array"},
		{name: "unterminated quote", col: arr(25), text: `{"a}`, wantErr: "invalid array"},
		{name: "no braces", col: arr(23), text: "1,2", wantErr: "invalid array"},
		{name: "stray brace", col: arr(23), text: "{1}}", wantErr: "invalid array"},
		{name: "junk after quote", col: arr(25), text: `{"a"b}`, wantErr: "invalid array"},
		{name: "NULL array", col: arr(23), null: true, wantErr: "NULL in a NOT NULL column"},
		{name: "nullable array is text", col: Column{TypeOID: 1, ElemOID: 23}, text: "{{1,2},{3,NULL}}", want: "{{1,2},{3,NULL}}"},
		{name: "key array is text", col: Column{TypeOID: 1, ElemOID: 23, Key: true}, text: "{1,NULL}", want: "{1,NULL}"},
		{name: "nullable array NULL", col: Column{TypeOID: 1, ElemOID: 23}, null: true, want: nil},
	})
	runConvertCases(t, CapabilitiesFor(18, 16), []convertCase{
		{name: "old bools", col: arr(16), text: "{t,NULL}", want: []*uint8{ptr(uint8(1)), nil}},
		{name: "old dates", col: arr(1082), text: "{1970-01-02,NULL}", want: []*int32{ptr(int32(1)), nil}},
	})
}

// pgArrayText formats strings (nil is NULL) as PostgreSQL's array_out does.
func pgArrayText(elems []*string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range elems {
		if i > 0 {
			b.WriteByte(',')
		}
		switch {
		case e == nil:
			b.WriteString("NULL")
		case needsArrayQuotes(*e):
			b.WriteByte('"')
			for _, c := range []byte(*e) {
				if c == '"' || c == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(c)
			}
			b.WriteByte('"')
		default:
			b.WriteString(*e)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// needsArrayQuotes is array_out's rule for quoting an element.
func needsArrayQuotes(s string) bool {
	return s == "" || strings.EqualFold(s, "NULL") || strings.ContainsAny(s, "{},\"\\ \t\n\r\v\f")
}

func FuzzArrayText(f *testing.F) {
	f.Add("a", "b c", true)
	f.Add(`"\`, "NULL", false)
	f.Add("", "{x}", true)
	f.Fuzz(func(t *testing.T, a, b string, withNull bool) {
		elems := []*string{&a, &b}
		if withNull {
			elems = append(elems, nil)
		}
		text := pgArrayText(elems)
		got, err := splitArray([]byte(text))
		if err != nil || len(got) != len(elems) {
			t.Fatalf("splitArray(%q) = %v, %v", text, got, err)
		}
		for i, e := range elems {
			if (e == nil) != got[i].null || (e != nil && !bytes.Equal([]byte(*e), got[i].text)) {
				t.Fatalf("splitArray(%q)[%d] = %q (null %v), want %v", text, i, got[i].text, got[i].null, e)
			}
		}
	})
}

func nan() float64    { return math.NaN() }
func negInf() float64 { return math.Inf(-1) }
