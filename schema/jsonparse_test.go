package schema

import (
	"encoding/json"
	"testing"
)

// TestParseJSON compares ferry's parser with encoding/json: the same texts
// are valid, and strings decode alike (escapes, surrogate pairs, an
// unpaired surrogate as U+FFFD).
func TestParseJSON(t *testing.T) {
	texts := []string{
		`{}`, `[]`, ` {"a" : [1, -0, 0.5, 1e5, 1E-5, -1.5e+3] } `, `"x"`, `null`, `true`, `false`, `0`,
		`{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`, `{a:1}`, `01`, `-`, `1.`, `.5`, `1e`, `+1`, `[1 2]`, `{"a":1}x`, ``, ` `,
		`"\u00e9\ud83d\ude00\n\t\"\\\/"`, `"\ud800"`, `"\ud800x"`, `"\udc00\ud800"`, `"\ud800\u0041"`, `"\x"`, `"\u12"`, "\"a\x01\"",
		`"é"`, `[[[]]]`, `{"":{"":[]}}`, `nul`, `tru`, `[true,false,null]`, `"unterminated`, `{"a":1`, `[`,
	}
	for _, s := range texts {
		n, err := parseJSON([]byte(s))
		if valid := json.Valid([]byte(s)); (err == nil) != valid {
			t.Errorf("parseJSON(%q): %v; encoding/json says valid %v", s, err, valid)
			continue
		}
		if err != nil || n.kind != 's' {
			continue
		}
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if n.str != want {
			t.Errorf("parseJSON(%s) = %q, encoding/json %q", s, n.str, want)
		}
	}
}
