package schema

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
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
// CheckJSON) and keeps its text, or the text with integers beyond UInt64
// respelt with an exponent (see jsonNumber).
func convertJSON(text []byte) (any, error) {
	out, err := prepareJSON(text)
	if err != nil {
		return nil, err
	}
	return JSON(out), nil
}

// RespellJSON is text, a value ClickHouse gave back, ready to be sent to it
// again (an unchanged TOASTed value carried from the stored row): ClickHouse
// prints a Float64 of 1e20 as 100000000000000000000, which it refuses to
// read, so such integers are respelt with an exponent as jsonNumber does.
// Text that needs nothing, or does not parse, is returned as is.
func RespellJSON(text string) string {
	n, err := parseJSON([]byte(text))
	if err != nil || !respell(n) {
		return text
	}
	var b strings.Builder
	writeJSON(&b, n, false)
	return b.String()
}

// respell respells the integers of n beyond Int64 and UInt64 that are
// exact in Float64, and reports whether there was one.
func respell(n *jsonNode) bool {
	done := false
	for _, m := range n.members {
		done = respell(m) || done
	}
	if n.kind == 'n' && isIntegerText(n.str) && !fitsInt64(n.str) {
		if _, err := strconv.ParseUint(n.str, 10, 64); err != nil && exactFloat(n.str) {
			r, _ := jsonNumber(n, "")
			done = done || r
		}
	}
	return done
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
//     refused (ferry respells those Float64 gives back exactly, see
//     jsonNumber), fractions and exponents lose what Float64 cannot hold
//     (3.14159265358979323846 becomes 3.141592653589793, 1e-400 becomes 0);
//   - gives arrays whose elements are all numbers or booleans (also inside
//     arrays of arrays) one common type: [true,1] becomes [1,1], and
//     [9007199254740993,0.5] loses the integer's last digit, as may
//     [9007199254740993] after another row (checkScalarMix);
//   - refuses strings with an unpaired UTF-16 surrogate escape, and values
//     nested more than about 1,000 levels deep.
//
// Many distinct paths (more than the column's max_dynamic_paths) are kept
// exactly, in the column's shared data.
//
// Key order, whitespace, a number's spelling (1.0, 1e2) and string escapes
// are not part of the value, so they may change.
func CheckJSON(text []byte) error {
	_, err := prepareJSON(text)
	return err
}

// prepareJSON is CheckJSON, returning the text to send: text itself, or
// when a number had to be respelt (jsonNumber) the value written again,
// in the same order.
func prepareJSON(text []byte) ([]byte, error) {
	if err := checkSurrogates(text); err != nil {
		return nil, err
	}
	n, err := parseJSON(text)
	if err != nil {
		if errors.Is(err, ErrUnrepresentable) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: not valid JSON (%v)", ErrUnrepresentable, err)
	}
	if n.kind != 'o' {
		return nil, fmt.Errorf("%w: ClickHouse's JSON type holds objects only, and the value is %s", ErrUnrepresentable, jsonKindName(n.kind))
	}
	respelt, err := checkJSONNode(n, "")
	if err != nil || !respelt {
		return text, err
	}
	var b strings.Builder
	writeJSON(&b, n, false)
	return []byte(b.String()), nil
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

// checkJSONNode checks n, found at path (for messages); respelt reports
// a number jsonNumber respelt.
func checkJSONNode(n *jsonNode, path string) (respelt bool, err error) {
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
				return false, fmt.Errorf("%w: key %q appears twice (ClickHouse refuses duplicate keys)", ErrUnrepresentable, p)
			case strings.Contains(k, "."):
				return false, fmt.Errorf("%w: key %q contains a dot (ClickHouse would split it into nested objects)", ErrUnrepresentable, p)
			case m.kind == 'z':
				return false, fmt.Errorf("%w: member %q is null (ClickHouse drops null members)", ErrUnrepresentable, p)
			case m.kind == 'o' && len(m.keys) == 0:
				return false, fmt.Errorf("%w: member %q is an empty object (ClickHouse drops it)", ErrUnrepresentable, p)
			}
			seen[k] = true
			r, err := checkJSONNode(m, p)
			if err != nil {
				return false, err
			}
			respelt = respelt || r
		}
	case 'a':
		// Elements first: a respelt integer is a Float64 to the array.
		for i, m := range n.members {
			r, err := checkJSONNode(m, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return false, err
			}
			respelt = respelt || r
		}
		if err := checkArrayType(n.members, path); err != nil {
			return false, err
		}
	case 'n':
		return jsonNumber(n, path)
	}
	return respelt, nil
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
// which ClickHouse stores as an array of one type. Booleans beside numbers
// become 1 and 0. The numbers may become Float64, and then come back as
// another number unless exactFloat: when a fraction is among them
// ([9007199254740993,0.5]), beside integers of both Int64 and UInt64
// ([12345678901234567890,1] after such an array), and also when an earlier
// row of the same INSERT had Float64 elements at the same path: 26.7 gave
// {"d":[9007199254740993]} back as {"d":[9007199254740992]} after a row
// {"d":[0.5]}. Other rows are unknown here, so every integer in an array of
// numbers must be exact in Float64 (within ±2^53, or one such as 2^60 whose
// shortest Float64 text is itself).
func checkScalarMix(elems []*jsonNode, path string) error {
	var bools, nums bool
	for _, e := range elems {
		switch e.kind {
		case 'b':
			bools = true
		case 'n':
			nums = true
			if isIntegerText(e.str) && !exactFloat(e.str) {
				return fmt.Errorf("%w: array %q holds the integer %s, which Float64 can't hold exactly "+
					"(ClickHouse may store an array of numbers as Float64: one with a fraction, or after such an array at the same path in the same INSERT)",
					ErrUnrepresentable, path, short(e.str))
			}
		}
	}
	if bools && nums {
		return fmt.Errorf("%w: array %q mixes booleans and numbers (ClickHouse would store the booleans as 1 and 0)", ErrUnrepresentable, path)
	}
	return nil
}

// isIntegerText: a JSON number without fraction or exponent.
func isIntegerText(s string) bool { return !strings.ContainsAny(s, ".eE") }

// exactFloat: ClickHouse gives the number s back as the same number when
// it stores it as Float64, which it prints in the shortest form that reads
// back as the same Float64: 2^60 is exact in Float64 but comes back as
// 1152921504606847000.
func exactFloat(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0) {
		return false
	}
	return canonicalNumber(strconv.FormatFloat(f, 'g', -1, 64)) == canonicalNumber(s)
}

var (
	minInt64  = big.NewInt(math.MinInt64)
	maxUint64 = new(big.Int).SetUint64(math.MaxUint64)
)

// jsonNumber checks that ClickHouse holds the JSON number n exactly: an
// integer within Int64 or UInt64, or a number with a fraction or an
// exponent that comes back from Float64 as the same number (exactFloat).
// An integer beyond UInt64 that Float64 holds so (jsonb writes 1e20 as
// 100000000000000000000, which ClickHouse refuses) is respelt with an
// exponent, so that ClickHouse reads it as Float64: n.str changes and
// respelt is true.
func jsonNumber(n *jsonNode, path string) (respelt bool, err error) {
	s := n.str
	if isIntegerText(s) {
		i, ok := new(big.Int).SetString(s, 10)
		if ok && i.Cmp(minInt64) >= 0 && i.Cmp(maxUint64) <= 0 {
			return false, nil
		}
		if len(s) < 400 && exactFloat(s) {
			f, _ := strconv.ParseFloat(s, 64)
			n.str = strconv.FormatFloat(f, 'e', -1, 64)
			return true, nil
		}
		return false, fmt.Errorf("%w: the integer %s at %q is outside Int64 and UInt64, and Float64 does not hold it", ErrUnrepresentable, short(s), path)
	}
	if !exactFloat(s) {
		f, _ := strconv.ParseFloat(s, 64)
		if math.IsInf(f, 0) {
			return false, fmt.Errorf("%w: the number %s at %q is beyond Float64", ErrUnrepresentable, short(s), path)
		}
		return false, fmt.Errorf("%w: the number %s at %q has more digits than Float64 holds (ClickHouse would store %s)",
			ErrUnrepresentable, short(s), path, strconv.FormatFloat(f, 'g', -1, 64))
	}
	return false, nil
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
	writeJSON(&b, n, true)
	return b.String()
}

// writeJSON writes n without whitespace: with canonical, keys sorted (the
// last of duplicates counting) and numbers as canonicalNumber; else keys
// and numbers as they are.
func writeJSON(b *strings.Builder, n *jsonNode, canonical bool) {
	switch n.kind {
	case 'o':
		order := make([]int, 0, len(n.keys))
		if canonical {
			last := make(map[string]int, len(n.keys))
			for i, k := range n.keys {
				last[k] = i
			}
			for _, i := range last {
				order = append(order, i)
			}
			sort.Slice(order, func(x, y int) bool { return n.keys[order[x]] < n.keys[order[y]] })
		} else {
			for i := range n.keys {
				order = append(order, i)
			}
		}
		b.WriteByte('{')
		for x, i := range order {
			if x > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, n.keys[i])
			b.WriteByte(':')
			writeJSON(b, n.members[i], canonical)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, m := range n.members {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, m, canonical)
		}
		b.WriteByte(']')
	case 's':
		writeJSONString(b, n.str)
	case 'n':
		if canonical {
			b.WriteString(canonicalNumber(n.str))
		} else {
			b.WriteString(n.str)
		}
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

// fitsInt64: the integer text s is a value of Int64.
func fitsInt64(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}
