package kafka

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-cdc/ferry/schema"
	"github.com/shopspring/decimal"
)

// Debezium's value encodings (the PostgreSQL connector's "Data type
// mappings" in postgresql.adoc), by decimal and time mode. Where
// PostgreSQL has a value Debezium's type cannot hold (infinite dates and
// timestamps, NaN numerics) ferry writes what it reads back losslessly:
// the integer type's extremes, or the string "NaN".

// appendEvent appends one value the publisher was handed in the form of
// cd's modes.
func appendEvent(b []byte, c column, cd codec, v any) ([]byte, error) {
	if cd.legacy {
		if c.textArray {
			return appendValue(b, kindText, false, v)
		}
		return appendValue(b, c.kind, c.array, v)
	}
	if v == nil {
		return append(b, "null"...), nil
	}
	if c.textArray {
		return appendTextArray(b, c, cd, v)
	}
	if c.array {
		elem := c
		elem.array = false
		return appendJSONArray(b, v, func(b []byte, e any) ([]byte, error) { return appendEvent(b, elem, cd, e) })
	}
	switch x := v.(type) {
	case decimal.Decimal:
		return appendDecimal(b, c, cd, x), nil
	case string:
		if c.kind == kindNumeric {
			return appendNumericText(b, cd, x), nil
		}
	case int32:
		if c.kind == kindDate && cd.time != TimeISOString {
			return strconv.AppendInt(b, int64(x), 10), nil
		}
	case int64:
		switch c.kind {
		case kindTimestamp, kindTime:
			if cd.time == TimeISOString {
				break
			}
			if x == math.MaxInt64 || x == math.MinInt64 || !millis(c, cd) {
				return strconv.AppendInt(b, x, 10), nil
			}
			return strconv.AppendInt(b, floorDiv(x, 1000), 10), nil
		case kindTimestampTZ:
			if x == math.MaxInt64 || x == math.MinInt64 {
				break
			}
			return appendString(b, zoned(x)), nil
		case kindInt:
			return strconv.AppendInt(b, x, 10), nil
		}
	case uint64:
		if c.kind == kindInt {
			return strconv.AppendUint(b, x, 10), nil
		}
	}
	return appendValue(b, c.kind, false, v)
}

// millis reports whether a timestamp or time column goes in milliseconds:
// always in connect mode, for precisions up to 3 in adaptive mode.
func millis(c column, cd codec) bool {
	return cd.time == TimeConnect || (cd.time == TimeAdaptive && c.prec <= 3)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// zoned writes microseconds since the epoch as Debezium's ZonedTimestamp:
// ISO 8601 in UTC, the fraction without trailing zeros.
func zoned(us int64) string {
	s := timestampISO(us, false)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	return s + "Z"
}

func appendDecimal(b []byte, c column, cd codec, x decimal.Decimal) []byte {
	switch cd.decimal {
	case DecimalString:
		return appendString(b, x.StringFixed(int32(c.prec)))
	case DecimalDouble:
		f, _ := x.Float64()
		return appendFloat(b, f, 64)
	}
	return appendString(b, base64.StdEncoding.EncodeToString(twosComplement(x.Shift(int32(c.prec)).BigInt())))
}

// appendNumericText writes a numeric Decimal cannot hold, given as
// PostgreSQL's text: in precise mode as Debezium's VariableScaleDecimal.
func appendNumericText(b []byte, cd codec, s string) []byte {
	d, err := decimal.NewFromString(s)
	if err != nil { // NaN, Infinity, -Infinity
		return appendString(b, s)
	}
	switch cd.decimal {
	case DecimalString:
		return appendString(b, s)
	case DecimalDouble:
		f, _ := d.Float64()
		return appendFloat(b, f, 64)
	}
	scale := int32(0)
	if i := strings.IndexByte(s, '.'); i >= 0 {
		scale = int32(len(s) - i - 1)
	}
	b = append(b, `{"scale":`...)
	b = strconv.AppendInt(b, int64(scale), 10)
	b = append(b, `,"value":`...)
	b = appendString(b, base64.StdEncoding.EncodeToString(twosComplement(d.Shift(scale).BigInt())))
	return append(b, '}')
}

// twosComplement is Java's BigInteger.toByteArray: big-endian two's
// complement in the fewest bytes, as Connect's Decimal holds it.
func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		raw := n.Bytes()
		if len(raw) == 0 || raw[0]&0x80 != 0 {
			raw = append([]byte{0}, raw...)
		}
		return raw
	}
	// -n = ^(n-1): the bytes of |n|-1, inverted.
	m := new(big.Int).Sub(new(big.Int).Neg(n), big.NewInt(1))
	raw := m.Bytes()
	if len(raw) == 0 || raw[0]&0x80 != 0 {
		raw = append([]byte{0}, raw...)
	}
	for i := range raw {
		raw[i] = ^raw[i]
	}
	return raw
}

func fromTwosComplement(raw []byte) *big.Int {
	n := new(big.Int).SetBytes(raw)
	if len(raw) > 0 && raw[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(raw))))
	}
	return n
}

// eventText turns one value of the Debezium-compatible form back into
// PostgreSQL's text output; null is SQL NULL.
func eventText(c column, cd codec, raw json.RawMessage) (text []byte, null bool, err error) {
	raw = bytes.TrimSpace(raw)
	if c.textArray && (cd.legacy || len(raw) == 0 || raw[0] != '[') {
		return pgText(kindText, false, raw) // the text as ferry sent it before, or a shape JSON arrays don't hold
	}
	if cd.legacy || len(raw) == 0 || string(raw) == "null" {
		return pgText(c.kind, c.array, raw)
	}
	if c.textArray {
		return textArrayText(c, cd, raw)
	}
	if c.array {
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, false, fmt.Errorf("want a JSON array: %w", err)
		}
		elem := c
		elem.array = false
		parts := make([][]byte, len(elems))
		nulls := make([]bool, len(elems))
		for i, e := range elems {
			if parts[i], nulls[i], err = eventText(elem, cd, e); err != nil {
				return nil, false, err
			}
		}
		return arrayText(parts, nulls), false, nil
	}
	switch c.kind {
	case kindDecimal, kindNumeric:
		return decimalText(c, cd, raw)
	case kindDate:
		if raw[0] != '"' {
			days, err := strconv.ParseInt(string(raw), 10, 32)
			if err != nil {
				return nil, false, fmt.Errorf("date: %w", err)
			}
			return []byte(pgDateDays(int32(days))), false, nil
		}
	case kindTimestamp, kindTime:
		if raw[0] != '"' {
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				return nil, false, fmt.Errorf("time: %w", err)
			}
			us := n
			if n != math.MaxInt64 && n != math.MinInt64 && millis(c, cd) {
				us = n * 1000
			}
			if c.kind == kindTime {
				return []byte(clock(us)), false, nil
			}
			return []byte(pgTimestampMicros(us, false)), false, nil
		}
	}
	return pgText(c.kind, false, raw)
}

// decimalText reads a numeric of any decimal mode.
func decimalText(c column, cd codec, raw json.RawMessage) ([]byte, bool, error) {
	switch {
	case raw[0] == '{': // VariableScaleDecimal
		var v struct {
			Scale int32  `json:"scale"`
			Value []byte `json:"value"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, false, fmt.Errorf("numeric: %w", err)
		}
		return []byte(decimal.NewFromBigInt(fromTwosComplement(v.Value), -v.Scale).StringFixed(v.Scale)), false, nil
	case raw[0] != '"': // double mode
		return []byte(raw), false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false, err
	}
	if cd.decimal != DecimalPrecise || c.kind == kindNumeric || s == "NaN" {
		return []byte(s), false, nil
	}
	unscaled, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, false, fmt.Errorf("numeric: %w", err)
	}
	return []byte(decimal.NewFromBigInt(fromTwosComplement(unscaled), -int32(c.prec)).StringFixed(int32(c.prec))), false, nil
}

// arrayText writes PostgreSQL's text of a one-dimensional array.
func arrayText(parts [][]byte, nulls []bool) []byte {
	b := []byte{'{'}
	for i, t := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		if nulls[i] {
			b = append(b, "NULL"...)
			continue
		}
		b = append(b, '"')
		for _, c := range t {
			if c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, c)
		}
		b = append(b, '"')
	}
	return append(b, '}')
}

func pgDateDays(days int32) string {
	switch days {
	case math.MaxInt32:
		return "infinity"
	case math.MinInt32:
		return "-infinity"
	}
	return pgDate(time.Unix(int64(days)*86400, 0).UTC())
}

func pgTimestampMicros(us int64, tz bool) string {
	switch us {
	case math.MaxInt64:
		return "infinity"
	case math.MinInt64:
		return "-infinity"
	}
	return pgTimestamp(time.UnixMicro(us).UTC(), tz)
}

// appendTextArray writes an array held as PostgreSQL's array text as a
// JSON array of its elements, each as a scalar of the element type. A
// value of another shape (more dimensions, custom bounds, which a column
// may hold whatever it declares) goes as its text in a JSON string.
func appendTextArray(b []byte, c column, cd codec, v any) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("want an array's text, got %T", v)
	}
	elems, nulls, err := schema.ArrayElements([]byte(s))
	if errors.Is(err, schema.ErrUnrepresentable) {
		return appendString(b, s), nil
	} else if err != nil {
		return nil, err
	}
	elem := c
	elem.textArray = false
	b = append(b, '[')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		switch {
		case nulls[i]:
			b = append(b, "null"...)
		case c.kind == kindFloat && json.Valid(e):
			b = append(b, e...) // PostgreSQL's shortest text, which the loader puts back as is
		default:
			x, err := c.elemConv(e)
			if err != nil {
				return nil, fmt.Errorf("array element %d: %w", i+1, err)
			}
			if b, err = appendEvent(b, elem, cd, x); err != nil {
				return nil, err
			}
		}
	}
	return append(b, ']'), nil
}

// textArrayText turns a JSON array of an array held as text back into
// PostgreSQL's array text, as array_out writes it: elements with their
// type's output text, quoted only where array_out quotes.
func textArrayText(c column, cd codec, raw json.RawMessage) ([]byte, bool, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false, fmt.Errorf("want a JSON array: %w", err)
	}
	elem := c
	elem.textArray = false
	b := []byte{'{'}
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		t, null, err := eventText(elem, cd, e)
		if err != nil {
			return nil, false, fmt.Errorf("array element %d: %w", i+1, err)
		}
		if null {
			b = append(b, "NULL"...)
			continue
		}
		switch c.kind {
		case kindTimestamp, kindTimestampTZ, kindTime:
			t = trimMicros(t)
		case kindDecimal:
			if d, err := decimal.NewFromString(string(t)); err == nil { // double mode's number
				t = []byte(d.StringFixed(int32(c.prec)))
			}
		}
		b = appendArrayElem(b, t)
	}
	return append(b, '}'), false, nil
}

// appendArrayElem appends one element as array_out does: in double quotes,
// with " and \ escaped, when it is empty, is NULL in any case, or has a
// quote, backslash, brace, comma or whitespace.
func appendArrayElem(b, t []byte) []byte {
	quote := len(t) == 0 || bytes.EqualFold(t, []byte("NULL"))
	for _, ch := range t {
		switch ch {
		case '"', '\\', '{', '}', ',', ' ', '\t', '\n', '\r', '\v', '\f':
			quote = true
		}
	}
	if !quote {
		return append(b, t...)
	}
	b = append(b, '"')
	for _, ch := range t {
		if ch == '"' || ch == '\\' {
			b = append(b, '\\')
		}
		b = append(b, ch)
	}
	return append(b, '"')
}

// trimMicros drops the trailing zeros of the six fractional digits
// pgTimestamp and clock write, and the point when all are zero, as
// PostgreSQL's output does.
func trimMicros(t []byte) []byte {
	i := bytes.IndexByte(t, '.')
	if i < 0 || len(t) < i+7 {
		return t
	}
	j := i + 7
	for j > i+1 && t[j-1] == '0' {
		j--
	}
	if j == i+1 {
		j = i
	}
	return append(append([]byte{}, t[:j]...), t[i+7:]...)
}
