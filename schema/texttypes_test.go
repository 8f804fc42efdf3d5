package schema

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// textTypeColumns are columns of every type ferry maps to String in
// PostgreSQL's text form on purpose, with a value of each as PostgreSQL
// prints it (DateStyle ISO, TimeZone UTC, IntervalStyle postgres,
// extra_float_digits 3).
var textTypeColumns = []struct {
	name string
	col  Column
	text string
}{
	{"interval", Column{TypeOID: 1186}, "1 year 2 mons -3 days +04:05:06.789"},
	{"interval negative micro", Column{TypeOID: 1186}, "-00:00:00.000001"},
	{"timetz", Column{TypeOID: 1266}, "13:14:15.5+05:30"},
	{"inet", Column{TypeOID: 869}, "192.168.0.1/24"},
	{"inet v6", Column{TypeOID: 869}, "2001:db8::1"},
	{"cidr", Column{TypeOID: 650}, "10.0.0.0/8"},
	{"macaddr", Column{TypeOID: 829}, "08:00:2b:01:02:03"},
	{"macaddr8", Column{TypeOID: 774}, "08:00:2b:ff:fe:01:02:03"},
	{"money", Column{TypeOID: 790}, "-$1,234.56"},
	{"bit", Column{TypeOID: 1560, TypeMod: 3}, "101"},
	{"varbit empty", Column{TypeOID: 1562}, ""},
	{"tsvector", Column{TypeOID: 3614}, "'a':1A 'cat':2 'fat':3"},
	{"tsquery", Column{TypeOID: 3615}, "'fat' & ( 'rat' | !'cat' )"},
	{"xml", Column{TypeOID: 142}, `<a x="1">b &amp; c</a>`},
	{"jsonpath", Column{TypeOID: 4072}, `$."a"[*]?(@ > 1)`},
	{"int4range", Column{TypeOID: 3904}, "[1,10)"},
	{"int4range empty", Column{TypeOID: 3904}, "empty"},
	{"int8range", Column{TypeOID: 3926}, "[-9223372036854775808,0)"},
	{"numrange", Column{TypeOID: 3906}, "(,5.50]"},
	{"tsrange", Column{TypeOID: 3908}, `["2024-01-01 00:00:00","2024-01-02 00:00:00.5")`},
	{"tstzrange infinite", Column{TypeOID: 3910}, `["2024-01-01 00:00:00+00",infinity)`},
	{"daterange", Column{TypeOID: 3912}, "[2024-01-01,2024-02-01)"},
	{"int4multirange", Column{TypeOID: 4451}, "{[1,3), [5,7)}"},
	{"int8multirange", Column{TypeOID: 4536}, "{}"},
	{"nummultirange", Column{TypeOID: 4532}, "{(,1.5]}"},
	{"tsmultirange", Column{TypeOID: 4533}, `{["2024-01-01 00:00:00",)}`},
	{"tstzmultirange", Column{TypeOID: 4534}, `{["2024-01-01 00:00:00+00",)}`},
	{"datemultirange", Column{TypeOID: 4535}, "{[2024-01-01,)}"},
	{"point", Column{TypeOID: 600}, "(1.5,-0.30000000000000004)"},
	{"line", Column{TypeOID: 628}, "{1,-1,0}"},
	{"lseg", Column{TypeOID: 601}, "[(0,0),(1,1)]"},
	{"box", Column{TypeOID: 603}, "(1,1),(0,0)"},
	{"path open", Column{TypeOID: 602}, "[(0,0),(1,1),(2,0)]"},
	{"path closed", Column{TypeOID: 602}, "((0,0),(1,1),(2,0))"},
	{"polygon", Column{TypeOID: 604}, "((0,0),(1,1),(1,0))"},
	{"circle", Column{TypeOID: 718}, "<(0,0),1.5>"},
	{"txid_snapshot", Column{TypeOID: 2970}, "10:20:10,14,15"},
	{"pg_snapshot", Column{TypeOID: 5038}, "10:20:"},
	{"tid", Column{TypeOID: 27}, "(0,1)"},
	{"regclass", Column{TypeOID: 2205}, `public."My Table"`},
	{"regclass dropped", Column{TypeOID: 2205}, "16385"},
	{"regtype", Column{TypeOID: 2206}, "character varying"},
	{"regproc", Column{TypeOID: 24}, "now"},
	{"regprocedure", Column{TypeOID: 2202}, "sum(integer)"},
	{"regoper", Column{TypeOID: 2203}, "+"},
	{"regoperator", Column{TypeOID: 2204}, "+(integer,integer)"},
	{"regconfig", Column{TypeOID: 3734}, "english"},
	{"regdictionary", Column{TypeOID: 3769}, "simple"},
	{"regnamespace", Column{TypeOID: 4089}, "public"},
	{"regrole", Column{TypeOID: 4096}, "postgres"},
	{"regcollation", Column{TypeOID: 4191}, `"C"`},
	{"citext", Column{TypeOID: 16390, TypeBaseName: "citext"}, "MiXeD Case"},
	{"hstore", Column{TypeOID: 16400, TypeBaseName: "hstore"}, `"a"=>"1", "b"=>NULL, "c \"q\""=>""`},
	{"geometry", Column{TypeOID: 16500, TypeBaseName: "geometry", TypeMod: 1107460}, "0101000020E6100000000000000000F03F0000000000000040"},
	{"geography", Column{TypeOID: 16600, TypeBaseName: "geography"}, "0101000020E6100000000000000000F03F0000000000000040"},
	{"domain over citext", Column{TypeOID: 16390, TypeBaseName: "citext", TypeName: "email"}, "A@B.example"},
}

func TestMapTextTypes(t *testing.T) {
	for _, caps := range []Capabilities{CapabilitiesFor(18, 16), CapabilitiesFor(25, 3)} {
		for _, tt := range textTypeColumns {
			for _, notNull := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/notnull=%v", tt.name, caps.DateTime64, notNull), func(t *testing.T) {
					col := tt.col
					col.Name, col.NotNull = "c", notNull
					m, err := Map(Table{Schema: "public", Name: "t", Columns: []Column{col}, AppendOnly: true}, caps)
					if err != nil {
						t.Fatal(err)
					}
					c := m.Columns[0]
					want := "String"
					if !notNull {
						want = "Nullable(String)"
					}
					if c.Type != want || c.Fallback {
						t.Errorf("got %s (fallback %v), want %s (fallback false)", c.Type, c.Fallback, want)
					}
				})
			}
		}
	}
}

func TestConvertTextTypes(t *testing.T) {
	var cases []convertCase
	for _, tt := range textTypeColumns {
		col := tt.col
		col.NotNull = true
		cases = append(cases, convertCase{name: tt.name, col: col, text: tt.text, want: tt.text})
	}
	runConvertCases(t, CapabilitiesFor(18, 16), cases)
	runConvertCases(t, CapabilitiesFor(25, 3), cases)
}

func TestMapExtensionNames(t *testing.T) {
	tests := []struct {
		name     string
		col      Column
		want     string
		fallback bool
	}{
		{"citext", Column{TypeOID: 16390, TypeBaseName: "citext", NotNull: true}, "String", false},
		{"unknown extension type", Column{TypeOID: 16391, TypeBaseName: "ltree", NotNull: true}, "String", true},
		{"no name", Column{TypeOID: 16390, TypeName: "citext", NotNull: true}, "String", true},
		{"name is case-sensitive", Column{TypeOID: 16390, TypeBaseName: "CITEXT", NotNull: true}, "String", true},
		{"OID wins over name", Column{TypeOID: 23, TypeBaseName: "citext", NotNull: true}, "Int32", false},
		{"hstore[] not null", Column{TypeOID: 16401, ElemOID: 16400, TypeBaseName: "hstore", NotNull: true}, "String", false},
		{"geometry[] not null", Column{TypeOID: 16501, ElemOID: 16500, TypeBaseName: "geometry", NotNull: true}, "String", false},
		{"box[] not null", Column{TypeOID: 1020, ElemOID: 603, NotNull: true}, "String", false},
		{"point[] not null", Column{TypeOID: 1017, ElemOID: 600, NotNull: true}, "Array(Nullable(String))", false},
		{"geometry[] nullable", Column{TypeOID: 16501, ElemOID: 16500, TypeBaseName: "geometry"}, "Nullable(String)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.col.Name = "c"
			m, err := Map(Table{Schema: "public", Name: "t", Columns: []Column{tt.col}, AppendOnly: true}, CapabilitiesFor(24, 8))
			if err != nil {
				t.Fatal(err)
			}
			if c := m.Columns[0]; c.Type != tt.want || c.Fallback != tt.fallback {
				t.Errorf("got %s (fallback %v), want %s (fallback %v)", c.Type, c.Fallback, tt.want, tt.fallback)
			}
		})
	}
}

func TestConvertUnsignedTypes(t *testing.T) {
	lsn := Column{TypeOID: 3220, NotNull: true}
	xid := Column{TypeOID: 28, NotNull: true}
	cid := Column{TypeOID: 29, NotNull: true}
	xid8 := Column{TypeOID: 5069, NotNull: true}
	arr := Column{TypeOID: 3221, ElemOID: 3220, NotNull: true}
	for _, caps := range []Capabilities{CapabilitiesFor(18, 16), CapabilitiesFor(23, 8)} {
		runConvertCases(t, caps, []convertCase{
			{name: "pg_lsn", col: lsn, text: "16/B374D848", want: uint64(0x16_B374D848)},
			{name: "pg_lsn zero", col: lsn, text: "0/0", want: uint64(0)},
			{name: "pg_lsn low only", col: lsn, text: "0/1", want: uint64(1)},
			{name: "pg_lsn max", col: lsn, text: "FFFFFFFF/FFFFFFFF", want: uint64(math.MaxUint64)},
			{name: "pg_lsn lower case", col: lsn, text: "a/b", want: uint64(0xa_0000000b)},
			{name: "pg_lsn leading zeros", col: lsn, text: "0000000A/0000000B", want: uint64(0xa_0000000b)},
			{name: "pg_lsn no slash", col: lsn, text: "16B374D848", wantErr: `invalid pg_lsn value "16B374D848"`},
			{name: "pg_lsn empty high", col: lsn, text: "/1", wantErr: "invalid pg_lsn"},
			{name: "pg_lsn empty low", col: lsn, text: "1/", wantErr: "invalid pg_lsn"},
			{name: "pg_lsn 9 digits", col: lsn, text: "123456789/0", wantErr: "invalid pg_lsn"},
			{name: "pg_lsn 9 low digits", col: lsn, text: "0/123456789", wantErr: "invalid pg_lsn"},
			{name: "pg_lsn not hex", col: lsn, text: "G/0", wantErr: "invalid pg_lsn"},
			{name: "pg_lsn two slashes", col: lsn, text: "1/2/3", wantErr: "invalid pg_lsn"},
			{name: "pg_lsn space", col: lsn, text: "0/0 ", wantErr: "invalid pg_lsn"},
			{name: "pg_lsn sign", col: lsn, text: "+1/0", wantErr: "invalid pg_lsn"},
			{name: "pg_lsn[]", col: arr, text: "{0/1,NULL,FFFFFFFF/0}", want: []*uint64{ptr(uint64(1)), nil, ptr(uint64(0xFFFFFFFF) << 32)}},
			{name: "xid", col: xid, text: "4294967295", want: uint32(math.MaxUint32)},
			{name: "xid overflow", col: xid, text: "4294967296", wantErr: `invalid xid value "4294967296"`},
			{name: "cid", col: cid, text: "0", want: uint32(0)},
			{name: "cid negative", col: cid, text: "-1", wantErr: "invalid cid"},
			{name: "xid8", col: xid8, text: "18446744073709551615", want: uint64(math.MaxUint64)},
			{name: "xid8 garbage", col: xid8, text: "1x", wantErr: "invalid xid8"},
		})
	}
}

func TestMapUnsignedTypes(t *testing.T) {
	tests := []struct {
		oid  uint32
		want string
	}{{3220, "UInt64"}, {5069, "UInt64"}, {28, "UInt32"}, {29, "UInt32"}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.oid), func(t *testing.T) {
			for _, caps := range []Capabilities{CapabilitiesFor(18, 16), CapabilitiesFor(25, 3)} {
				m, err := Map(Table{Schema: "public", Name: "t", AppendOnly: true, Columns: []Column{{Name: "c", TypeOID: tt.oid}}}, caps)
				if err != nil {
					t.Fatal(err)
				}
				if c := m.Columns[0]; c.Type != "Nullable("+tt.want+")" || c.Fallback {
					t.Errorf("got %s (fallback %v), want Nullable(%s)", c.Type, c.Fallback, tt.want)
				}
			}
		})
	}
}

func TestLiteralUnsigned(t *testing.T) {
	for _, v := range []any{uint64(math.MaxUint64), uint32(math.MaxUint32)} {
		lit, err := Literal(v)
		if err != nil || lit != Canonical(v) || strings.ContainsAny(lit, "-.e") {
			t.Errorf("Literal(%v) = %q, %v; Canonical %q", v, lit, err, Canonical(v))
		}
	}
}

func TestConvertArrayTextTypes(t *testing.T) {
	nn := func(elem uint32, name string) Column {
		return Column{TypeOID: 1, ElemOID: elem, TypeBaseName: name, NotNull: true}
	}
	runConvertCases(t, CapabilitiesFor(18, 16), []convertCase{
		{name: "interval[]", col: nn(1186, ""), text: `{"1 day","-00:00:01",NULL}`, want: []*string{ptr("1 day"), ptr("-00:00:01"), nil}},
		{name: "inet[]", col: nn(869, ""), text: "{192.168.0.1/24,::1}", want: []*string{ptr("192.168.0.1/24"), ptr("::1")}},
		{name: "point[]", col: nn(600, ""), text: `{"(1,2)","(3,4.5)"}`, want: []*string{ptr("(1,2)"), ptr("(3,4.5)")}},
		{name: "int4range[]", col: nn(3904, ""), text: `{"[1,3)",empty}`, want: []*string{ptr("[1,3)"), ptr("empty")}},
		{name: "box[] is text (delimiter ;)", col: nn(603, ""), text: "{(1,1),(0,0);(2,2),(1,1)}", want: "{(1,1),(0,0);(2,2),(1,1)}"},
		{name: "geometry[] is text (delimiter :)", col: nn(16500, "geometry"), text: "{0101000000000000000000F03F0000000000000040:010100000000000000000000000000000000000000}",
			want: "{0101000000000000000000F03F0000000000000040:010100000000000000000000000000000000000000}"},
		{name: "timestamp[] infinity", col: nn(1114, ""), text: "{infinity,-infinity,NULL}", want: []*int64{ptr(int64(math.MaxInt64)), ptr(int64(math.MinInt64)), nil}},
		{name: "date[] infinity", col: nn(1082, ""), text: "{-infinity,1970-01-01}", want: []*int32{ptr(int32(math.MinInt32)), ptr(int32(0))}},
		{name: "citext[] is text", col: nn(16390, "citext"), text: `{A,"b c"}`, want: `{A,"b c"}`},
		{name: "hstore[] is text", col: nn(16400, "hstore"), text: `{"\"a\"=>\"1\""}`, want: `{"\"a\"=>\"1\""}`},
	})
}

func TestConvertMultiDimArrays(t *testing.T) {
	md := func(dims int, notNull bool) Column {
		return Column{TypeOID: 1007, ElemOID: 23, Dims: dims, NotNull: notNull}
	}
	runConvertCases(t, CapabilitiesFor(24, 8), []convertCase{
		{name: "2-D not null", col: md(2, true), text: "{{1,2},{3,NULL}}", want: "{{1,2},{3,NULL}}"},
		{name: "2-D holding 1-D value", col: md(2, true), text: "{1,2}", want: "{1,2}"},
		{name: "2-D custom bounds", col: md(2, true), text: "[0:1][1:1]={{1},{2}}", want: "[0:1][1:1]={{1},{2}}"},
		{name: "2-D nullable", col: md(2, false), text: "{{1}}", want: "{{1}}"},
		{name: "2-D NULL", col: md(2, false), null: true, want: nil},
		{name: "3-D empty", col: md(3, true), text: "{}", want: "{}"},
		{name: "1-D declared, 2-D value", col: md(1, true), text: "{{1,2},{3,4}}",
			wantErr: "only one-dimensional arrays with default bounds fit Array: value not representable; " + textFix},
		{name: "undeclared dims, 2-D value", col: md(0, true), text: "{{1}}", wantErr: textFix},
	})
}

func FuzzPgLSN(f *testing.F) {
	f.Add(uint64(0), "0/0")
	f.Add(uint64(0x16_B374D848), "16/B374D848")
	f.Add(uint64(math.MaxUint64), "ffffffff/FFFFFFFF")
	f.Add(uint64(1), "/")
	f.Fuzz(func(t *testing.T, v uint64, s string) {
		text := fmt.Sprintf("%X/%X", v>>32, v&0xffffffff)
		if got, err := parsePgLSN([]byte(text)); err != nil || got != v {
			t.Fatalf("parsePgLSN(%q) = %d, %v; want %d", text, got, err, v)
		}
		got, err := parsePgLSN([]byte(s))
		if err != nil {
			return
		}
		// What parses must be two runs of 1 to 8 hex digits around a slash,
		// denoting the same value.
		hi, lo, ok := strings.Cut(s, "/")
		if !ok || len(hi) < 1 || len(hi) > 8 || len(lo) < 1 || len(lo) > 8 {
			t.Fatalf("parsePgLSN accepted %q", s)
		}
		var h, l uint64
		if _, err := fmt.Sscanf(hi+" "+lo, "%x %x", &h, &l); err != nil || h<<32|l != got {
			t.Fatalf("parsePgLSN(%q) = %d, want %d<<32|%d", s, got, h, l)
		}
	})
}
