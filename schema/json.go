package schema

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// JSON is a json or jsonb value bound for a ClickHouse JSON column
// (Table.NativeJSON): PostgreSQL's text of it, unchanged. Canonical gives its
// canonical form (CanonicalJSON), so that a value read back from ClickHouse
// compares equal exactly when it is the same JSON value.
type JSON string

// Value sends the text to clickhouse-go, which passes it to the server to
// parse (the JSON column's string serialization).
func (j JSON) Value() (driver.Value, error) { return string(j), nil }

// String is the text.
func (j JSON) String() string { return string(j) }

// maxJSONDepth is how deeply objects and arrays may nest in a value stored
// as ClickHouse JSON. 26.7 parsed 1,001 levels and refused 2,000; ferry
// stays at 1,000, the default input_format_json_max_depth.
const maxJSONDepth = 1000

// jsonKind maps json and jsonb to ClickHouse's JSON type. A deleted row of a
// NOT NULL column, and NULL under NullAsDefault, are the empty object.
func jsonKind() kind {
	return kind{chType: "JSON", scalar: convertJSON, zero: JSON("{}")}
}

// convertJSON accepts a value ClickHouse's JSON type stores exactly (see
// CheckJSON) and keeps its text.
func convertJSON(text []byte) (any, error) {
	if err := CheckJSON(text); err != nil {
		return nil, err
	}
	return JSON(text), nil
}

// jsonNode is one parsed JSON value: exactly one of the fields describes it.
type jsonNode struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys    []string
	members []*jsonNode // object members in text order, or array elements
	str     string      // a string's value, a number's text, "true"/"false"
}

// parseJSON parses text into a tree, keeping duplicate keys and the text of
// numbers.
func parseJSON(text []byte) (*jsonNode, error) {
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	n, err := parseJSONValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON value")
	}
	return n, nil
}

func parseJSONValue(d *json.Decoder, depth int) (*jsonNode, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	return parseJSONToken(d, tok, depth)
}

func parseJSONToken(d *json.Decoder, tok json.Token, depth int) (*jsonNode, error) {
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxJSONDepth {
			return nil, fmt.Errorf("%w: nested more than %d levels deep", ErrUnrepresentable, maxJSONDepth)
		}
		n := &jsonNode{kind: 'a'}
		if t == '{' {
			n.kind = 'o'
		}
		for d.More() {
			if n.kind == 'o' {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			m, err := parseJSONValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			n.members = append(n.members, m)
		}
		if _, err := d.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &jsonNode{kind: 's', str: t}, nil
	case json.Number:
		return &jsonNode{kind: 'n', str: string(t)}, nil
	case bool:
		return &jsonNode{kind: 'b', str: strconv.FormatBool(t)}, nil
	case nil:
		return &jsonNode{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// CheckJSON reports whether ClickHouse's JSON type stores the JSON value of
// text exactly, that is whether the value ClickHouse gives back is the same
// JSON value (CanonicalJSON equal), and if not why, wrapping
// ErrUnrepresentable. Measured on ClickHouse 26.7, with date inference off
// as ferry's inserts set it, the type
//   - holds only objects at the top level (a scalar or an array is refused,
//     a top-level null becomes {});
//   - drops object members whose value is null or an empty object, at any
//     depth ({"a":null} and {"a":{}} become {});
//   - splits keys at dots ({"a.b":1} becomes {"a":{"b":1}}) and refuses
//     duplicate keys;
//   - parses numbers as Int64, UInt64 or Float64: integers beyond those are
//     refused, fractions and exponents lose what Float64 cannot hold
//     (3.14159265358979323846 becomes 3.141592653589793, 1e-400 becomes 0);
//   - gives arrays whose elements are all numbers or booleans (also inside
//     arrays of arrays) one common type: [true,1] becomes [1,1], and
//     [9007199254740993,0.5] loses the integer's last digit;
//   - refuses strings with an unpaired UTF-16 surrogate escape.
//
// Key order, whitespace, a number's spelling (1.0, 1e2) and string escapes
// are not part of the value, so they may change.
func CheckJSON(text []byte) error {
	if err := checkSurrogates(text); err != nil {
		return err
	}
	n, err := parseJSON(text)
	if err != nil {
		if errors.Is(err, ErrUnrepresentable) {
			return err
		}
		return fmt.Errorf("%w: not valid JSON (%v)", ErrUnrepresentable, err)
	}
	if n.kind != 'o' {
		return fmt.Errorf("%w: ClickHouse's JSON type holds objects only, and the value is %s", ErrUnrepresentable, jsonKindName(n.kind))
	}
	return checkJSONNode(n, "")
}

func jsonKindName(k byte) string {
	switch k {
	case 'a':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	case 'z':
		return "null"
	}
	return "an object"
}

// checkJSONNode checks n, found at path (for messages).
func checkJSONNode(n *jsonNode, path string) error {
	switch n.kind {
	case 'o':
		seen := make(map[string]bool, len(n.keys))
		for i, k := range n.keys {
			p := path + "." + k
			if path == "" {
				p = k
			}
			m := n.members[i]
			switch {
			case seen[k]:
				return fmt.Errorf("%w: key %q appears twice (ClickHouse refuses duplicate keys)", ErrUnrepresentable, p)
			case strings.Contains(k, "."):
				return fmt.Errorf("%w: key %q contains a dot (ClickHouse would split it into nested objects)", ErrUnrepresentable, p)
			case m.kind == 'z':
				return fmt.Errorf("%w: member %q is null (ClickHouse drops null members)", ErrUnrepresentable, p)
			case m.kind == 'o' && len(m.keys) == 0:
				return fmt.Errorf("%w: member %q is an empty object (ClickHouse drops it)", ErrUnrepresentable, p)
			}
			seen[k] = true
			if err := checkJSONNode(m, p); err != nil {
				return err
			}
		}
	case 'a':
		if err := checkArrayType(n.members, path); err != nil {
			return err
		}
		for i, m := range n.members {
			if err := checkJSONNode(m, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case 'n':
		if err := jsonNumber(n.str, path); err != nil {
			return err
		}
	}
	return nil
}

// checkArrayType refuses arrays whose elements ClickHouse would convert to
// one type with a loss: booleans with numbers, or integers Float64 can't
// hold with fractions. Arrays whose elements are all arrays are unified
// element-wise, so their elements are checked together; an array of
// other mixed elements (strings with numbers, objects) keeps each as is.
func checkArrayType(elems []*jsonNode, path string) error {
	for {
		allArrays, scalars, some := true, true, false
		var inner []*jsonNode
		for _, e := range elems {
			switch e.kind {
			case 'z':
				continue
			case 'a':
				inner = append(inner, e.members...)
				scalars = false
			case 'n', 'b':
				allArrays = false
			default:
				allArrays, scalars = false, false
			}
			some = true
		}
		switch {
		case !some:
			return nil
		case allArrays:
			elems = inner
			continue
		case !scalars:
			return nil
		}
		return checkScalarMix(elems, path)
	}
}

// checkScalarMix checks elements that are all numbers, booleans or null,
// which ClickHouse stores as one type.
func checkScalarMix(elems []*jsonNode, path string) error {
	var bools, nums, fracs bool
	var inexact string
	for _, e := range elems {
		switch {
		case e.kind == 'b':
			bools = true
		case e.kind != 'n':
		case !isIntegerText(e.str):
			nums, fracs = true, true
		default:
			nums = true
			if inexact == "" && !exactFloat(e.str) {
				inexact = e.str
			}
		}
	}
	switch {
	case bools && nums:
		return fmt.Errorf("%w: array %q mixes booleans and numbers (ClickHouse would store the booleans as 1 and 0)", ErrUnrepresentable, path)
	case fracs && inexact != "":
		return fmt.Errorf("%w: array %q mixes fractions with the integer %s, which Float64 can't hold exactly (ClickHouse would store every element as Float64)",
			ErrUnrepresentable, path, inexact)
	}
	return nil
}

// isIntegerText: a JSON number without fraction or exponent.
func isIntegerText(s string) bool { return !strings.ContainsAny(s, ".eE") }

// exactFloat: the integer text s is a value of Float64.
func exactFloat(s string) bool {
	i, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return false
	}
	_, acc := new(big.Float).SetInt(i).Float64()
	return acc == big.Exact
}

var (
	minInt64  = big.NewInt(math.MinInt64)
	maxUint64 = new(big.Int).SetUint64(math.MaxUint64)
)

// jsonNumber checks that ClickHouse holds the JSON number s exactly: an
// integer within Int64 or UInt64, or a number with a fraction or an
// exponent whose Float64 is the same number.
func jsonNumber(s, path string) error {
	if isIntegerText(s) {
		i, ok := new(big.Int).SetString(s, 10)
		if !ok || i.Cmp(minInt64) < 0 || i.Cmp(maxUint64) > 0 {
			return fmt.Errorf("%w: the integer %s at %q is outside Int64 and UInt64", ErrUnrepresentable, short(s), path)
		}
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0) {
		return fmt.Errorf("%w: the number %s at %q is beyond Float64", ErrUnrepresentable, short(s), path)
	}
	if stored := strconv.FormatFloat(f, 'g', -1, 64); canonicalNumber(stored) != canonicalNumber(s) {
		return fmt.Errorf("%w: the number %s at %q has more digits than Float64 holds (ClickHouse would store %s)",
			ErrUnrepresentable, short(s), path, stored)
	}
	return nil
}

// short cuts a number's text for a message.
func short(s string) string {
	if len(s) > maxValueInError {
		return s[:maxValueInError] + "..."
	}
	return s
}

// checkSurrogates refuses a \uD800-\uDFFF escape that is not a high
// surrogate followed by a low one: ClickHouse refuses the value.
func checkSurrogates(text []byte) error {
	for i := 0; i+5 < len(text); i++ {
		if text[i] != '\\' {
			continue
		}
		if text[i+1] != 'u' {
			i++ // an escaped character, maybe a backslash
			continue
		}
		v, err := strconv.ParseUint(string(text[i+2:i+6]), 16, 16)
		if err != nil {
			return nil // not valid JSON: parseJSON says so
		}
		switch {
		case v >= 0xd800 && v < 0xdc00:
			if i+11 < len(text) && text[i+6] == '\\' && text[i+7] == 'u' {
				lo, err := strconv.ParseUint(string(text[i+8:i+12]), 16, 16)
				if err == nil && lo >= 0xdc00 && lo < 0xe000 {
					i += 11
					continue
				}
			}
			return fmt.Errorf("%w: a string holds the unpaired surrogate escape %s", ErrUnrepresentable, text[i:i+6])
		case v >= 0xdc00 && v < 0xe000:
			return fmt.Errorf("%w: a string holds the unpaired surrogate escape %s", ErrUnrepresentable, text[i:i+6])
		}
		i += 5
	}
	return nil
}

// CanonicalJSON is a text of the JSON value of text such that two texts of
// the same value give the same: object keys sorted bytewise (of duplicate
// keys the last counts, as in jsonb), no whitespace, strings with Go's JSON
// escaping, numbers as their exact value (1, 1.0 and 1e0 are "1"; 0.25 is
// "25e-2"). Text that does not parse is returned as is, marked, so that it
// never equals a valid value.
func CanonicalJSON(text string) string {
	n, err := parseJSON([]byte(text))
	if err != nil {
		return "invalid JSON: " + text
	}
	var b strings.Builder
	writeCanonicalJSON(&b, n)
	return b.String()
}

func writeCanonicalJSON(b *strings.Builder, n *jsonNode) {
	switch n.kind {
	case 'o':
		last := make(map[string]int, len(n.keys))
		for i, k := range n.keys {
			last[k] = i
		}
		keys := make([]string, 0, len(last))
		for k := range last {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			writeCanonicalJSON(b, n.members[last[k]])
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, m := range n.members {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonicalJSON(b, m)
		}
		b.WriteByte(']')
	case 's':
		writeJSONString(b, n.str)
	case 'n':
		b.WriteString(canonicalNumber(n.str))
	case 'b':
		b.WriteString(n.str)
	default:
		b.WriteString("null")
	}
}

func writeJSONString(b *strings.Builder, s string) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// canonicalNumber writes the exact value of a JSON number as an integer
// coefficient without trailing zeros and a decimal exponent.
func canonicalNumber(s string) string {
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil {
			return s
		}
		mant, exp = s[:i], e
	}
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		exp -= len(mant) - i - 1
		mant = mant[:i] + mant[i+1:]
	}
	mant = strings.TrimLeft(mant, "0")
	if mant == "" {
		return "0"
	}
	for strings.HasSuffix(mant, "0") {
		mant = mant[:len(mant)-1]
		exp++
	}
	if neg {
		mant = "-" + mant
	}
	if exp == 0 {
		return mant
	}
	return mant + "e" + strconv.Itoa(exp)
}
