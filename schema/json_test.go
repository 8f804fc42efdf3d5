package schema

import (
	"errors"
	"strings"
	"testing"
)

// JSONExactCases are values ClickHouse's JSON type stores exactly (checked
// against a server by replicator's TestNativeJSONCorpus), and
// JSONAlteredCases values it alters or refuses, with the reason CheckJSON
// gives.
var JSONExactCases = []string{
	`{}`,
	`{"b":1,"a":2}`,
	`{"a":12345678901234567890,"b":-9223372036854775808,"c":18446744073709551615}`,
	`{"a":1.0,"b":1e2,"c":1E+2,"d":0.1,"e":-0.0,"f":-0,"g":5e-324,"h":1.7976931348623157e308}`,
	`{"a":0.30000000000000004,"b":1.5e300}`,
	`{"a":[],"b":[[]],"c":[{}],"d":[null],"e":[null,1]}`,
	`{"a":[1,"x",null,[2,{"b":3}]]}`,
	`{"a":[9223372036854775807,"s"],"b":[12345678901234567890,"s",-1],"c":{"d":12345678901234567890}}`,
	`{"a":[1,2.5],"b":[[1,2],[3.5]],"c":[1,1e20]}`,
	`{"a":[9007199254740992,1],"b":[-9007199254740992,-1],"c":[{"x":12345678901234567890},{"x":-1}],"d":[1000000000000000000000,0.5]}`,
	`{"a":[18014398509481984,-1,1e20]}`,
	`{"a":[9007199254740993,"s",0.5],"b":[true,"s",1],"c":[1,[true]]}`,
	`{"a":[{"x":9007199254740993},{"x":0.5}],"b":[{"x":true},{"x":1}]}`,
	`{"a":"\u00e9\u0000\ud83d\ude00","b":"x\"y\\z\n\t/","c":"é"}`,
	`{"a":"2024-1-1","b":"2024-01-01T00:00:00Z","c":"123","d":"true","e":"00123","f":"1e5","g":"nan"}`,
	`{"":1,"a b":{"c":[true,false]},"ключ":"значение"}`,
	` { "spaced" : [ 1 , 2 ] } `,
}

var JSONAlteredCases = []struct{ value, reason string }{
	{`{"a":null}`, "null"},
	{`{"a":{"b":{"c":null}}}`, "null"},
	{`{"a":[{"b":null}]}`, "null"},
	{`{"a":{}}`, "empty object"},
	{`{"a":[{"b":{}}]}`, "empty object"},
	{`{"a":1,"a":2}`, "twice"},
	{`{"a.b":1}`, "dot"},
	{`{"a":[{"b.c":1}]}`, "dot"},
	{`{"a":123456789012345678901234567890}`, "outside Int64"},
	{`{"a":-9223372036854775809}`, "outside Int64"},
	{`{"a":1e400}`, "beyond Float64"},
	{`{"a":1e-400}`, "more digits"},
	{`{"a":3.141592653589793238462643383279}`, "more digits"},
	{`{"a":9007199254740993.0}`, "more digits"},
	{`{"a":[true,1]}`, "booleans and numbers"},
	{`{"a":[[true],[1]]}`, "booleans and numbers"},
	{`{"a":[9007199254740993,0.5]}`, "Float64 can't hold"},
	{`{"a":[[9007199254740993],[0.5]]}`, "Float64 can't hold"},
	{`{"a":[1152921504606846976,0.5]}`, "Float64 can't hold"},
	{`{"a":[12345678901234567890,-1]}`, "Float64 can't hold"},
	{`{"a":[9007199254740993]}`, "Float64 can't hold"},
	{`{"a":[{"x":[9007199254740993]}]}`, "Float64 can't hold"},
	{`{"a":1152921504606846976.0}`, "more digits"},
	{`{"a":18446744073709551616}`, "Float64 does not hold"},
	{`{"a":"\ud800"}`, "surrogate"},
	{`{"a":"\udc00x"}`, "surrogate"},
	{`1`, "objects only"},
	{`[1,2]`, "objects only"},
	{`"s"`, "objects only"},
	{`null`, "objects only"},
	{strings.Repeat(`{"a":`, 1001) + `1` + strings.Repeat(`}`, 1001), "nested"},
}

func TestCheckJSON(t *testing.T) {
	for _, v := range JSONExactCases {
		if err := CheckJSON([]byte(v)); err != nil {
			t.Errorf("CheckJSON(%s) = %v, want nil", v, err)
		}
	}
	for _, c := range JSONAlteredCases {
		err := CheckJSON([]byte(c.value))
		if !errors.Is(err, ErrUnrepresentable) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("CheckJSON(%.60s) = %v, want ErrUnrepresentable saying %q", c.value, err, c.reason)
		}
	}
	if err := CheckJSON([]byte(strings.Repeat(`{"a":`, 999) + `1` + strings.Repeat(`}`, 999))); err != nil {
		t.Errorf("999 levels: %v", err)
	}
}

// TestRespeltJSON: jsonb writes numbers with an exponent as plain digits
// (1e20 as 100000000000000000000), integers beyond UInt64 that ClickHouse
// refuses; when Float64 gives them back as the same number ferry sends
// them with an exponent, which ClickHouse reads as Float64.
func TestRespeltJSON(t *testing.T) {
	m, err := Map(Table{Schema: "public", Name: "t", NativeJSON: true, Columns: []Column{
		{Name: "id", TypeOID: oidInt4, Key: true}, {Name: "j", TypeOID: oidJSONB}}}, CapabilitiesFor(26, 7))
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		`{"a": 100000000000000000000, "b": [1, 100000000000000000000], "c": 5}`: `{"a":1e+20,"b":[1,1e+20],"c":5}`,
		`{"z": 1, "a": "1e20"}`:                    `{"z": 1, "a": "1e20"}`,
		`{"a": 1` + strings.Repeat("0", 300) + `}`: `{"a":1e+300}`,
	} {
		v, err := m.Columns[1].Convert([]byte(in), false)
		if err != nil || v != JSON(want) {
			t.Errorf("Convert(%.60s) = %v, %v; want %s", in, v, err, want)
			continue
		}
		if CanonicalJSON(string(v.(JSON))) != CanonicalJSON(in) {
			t.Errorf("respelt %s is not the value %s", v, in)
		}
	}
}

func TestRespellJSONCarried(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":100000000000000000000,"b":[1.5,1e300],"c":"100000000000000000000"}`: `{"a":1e+20,"b":[1.5,1e300],"c":"100000000000000000000"}`,
		`{"a":18446744073709551615,"b":-9223372036854775808}`:                     `{"a":18446744073709551615,"b":-9223372036854775808}`,
		`not json`: `not json`,
	} {
		if got := RespellJSON(in); got != want {
			t.Errorf("RespellJSON(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	same := [][]string{
		{`{"b":1,"a":[1,2]}`, `{ "a" : [1, 2], "b" : 1 }`, `{"a":[1.0,2e0],"b":100e-2}`},
		{`{"a":"é"}`, `{"a":"\u00e9"}`, `{"a":"\u00E9"}`},
		{`{"a":0}`, `{"a":-0}`, `{"a":-0.0}`, `{"a":0e10}`},
		{`{"a":1,"a":2}`, `{"a":2}`}, // jsonb's rule: the last duplicate counts
		{`{"a":12345678901234567890}`, `{"a":1234567890123456789e1}`},
		{`{"a":"\u0000"}`, "{\"a\":\"\\u0000\"}"},
	}
	for _, group := range same {
		want := CanonicalJSON(group[0])
		for _, v := range group[1:] {
			if got := CanonicalJSON(v); got != want {
				t.Errorf("CanonicalJSON(%s) = %s, want %s as for %s", v, got, want, group[0])
			}
		}
	}
	differ := [][2]string{
		{`{"a":null}`, `{}`},
		{`{"a":{}}`, `{}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
		{`{"a":3.141592653589793238}`, `{"a":3.141592653589793}`},
		{`{"a":true}`, `{"a":1}`},
		{`{"a.b":1}`, `{"a":{"b":1}}`},
		{`{"a":"2024-1-1"}`, `{"a":"2024-01-01"}`},
		{`not json`, `not json `},
	}
	for _, d := range differ {
		if a, b := CanonicalJSON(d[0]), CanonicalJSON(d[1]); a == b {
			t.Errorf("CanonicalJSON(%s) = CanonicalJSON(%s) = %s, want them different", d[0], d[1], a)
		}
	}
	if got := CanonicalJSON(`{"b":[1.50,"x",null,true],"a":{"c":-2.5e3}}`); got != `{"a":{"c":-25e2},"b":[15e-1,"x",null,true]}` {
		t.Errorf("CanonicalJSON = %s", got)
	}
}

func TestMapNativeJSON(t *testing.T) {
	modern, legacy := CapabilitiesFor(26, 7), CapabilitiesFor(18, 16)
	tbl := Table{Schema: "public", Name: "t", NativeJSON: true, Columns: []Column{
		{Name: "id", TypeOID: oidJSONB, Key: true},
		{Name: "j", TypeOID: oidJSONB},
		{Name: "k", TypeOID: oidJSON, NotNull: true},
		{Name: "arr", TypeOID: 3807, ElemOID: oidJSONB, NotNull: true},
		{Name: "txt", TypeOID: oidJSONB, Text: true},
	}}
	cases := []struct {
		caps   Capabilities
		native bool
		want   []string
	}{
		{modern, true, []string{"String", "Nullable(JSON)", "JSON", "Array(Nullable(String))", "Nullable(String)"}},
		{modern, false, []string{"String", "Nullable(String)", "String", "Array(Nullable(String))", "Nullable(String)"}},
		{legacy, true, []string{"String", "Nullable(String)", "String", "Array(Nullable(String))", "Nullable(String)"}},
		{CapabilitiesFor(25, 2), true, []string{"String", "Nullable(String)", "String", "Array(Nullable(String))", "Nullable(String)"}},
		{CapabilitiesFor(25, 3), true, []string{"String", "Nullable(JSON)", "JSON", "Array(Nullable(String))", "Nullable(String)"}},
	}
	for _, c := range cases {
		tbl.NativeJSON = c.native
		m, err := Map(tbl, c.caps)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range c.want {
			if m.Columns[i].Type != w {
				t.Errorf("native %v caps %+v: column %s is %s, want %s", c.native, c.caps, m.Columns[i].Name, m.Columns[i].Type, w)
			}
		}
	}
	tbl.NativeJSON = true
	m, _ := Map(tbl, modern)
	v, err := m.Columns[1].Convert([]byte(`{"a":1}`), false)
	if err != nil || v != JSON(`{"a":1}`) {
		t.Errorf("Convert = %#v, %v; want the text as JSON", v, err)
	}
	_, err = m.Columns[1].Convert([]byte(`{"a":null}`), false)
	if !errors.Is(err, ErrUnrepresentable) || !strings.Contains(err.Error(), "--text-columns public.t.j") || !strings.Contains(err.Error(), "--json-type=string") {
		t.Errorf("Convert of a null member: %v, want ErrUnrepresentable naming --text-columns public.t.j and --json-type=string", err)
	}
	if v, err := m.Columns[2].Convert(nil, true); err == nil {
		t.Errorf("NULL in a NOT NULL json column converted to %v", v)
	}
	if z := m.Columns[2].Zero(); z != JSON("{}") {
		t.Errorf("Zero of a JSON column = %#v, want {}", z)
	}
	tbl.NullAsDefault = true
	m, _ = Map(tbl, modern)
	if v, err := m.Columns[1].Convert(nil, true); m.Columns[1].Type != "JSON" || err != nil || v != JSON("{}") {
		t.Errorf("NullAsDefault: column j is %s and NULL converts to %#v, %v; want JSON and {}", m.Columns[1].Type, v, err)
	}
	if c := Canonical(JSON(`{"b":1, "a":2}`)); c != `{"a":2,"b":1}` {
		t.Errorf("Canonical(JSON) = %s", c)
	}
}
