package schema

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// Literal is a ClickHouse SQL literal of a value Convert produced, for key
// lookups such as WHERE (k1, k2) IN ((..), (..)). Every literal compares
// equal to the stored value on every supported server: integers and floats
// as exact numeric text (float32 widened exactly to float64; nan, inf,
// -inf), decimals as toDecimal128('text', scale) (toDecimal256 past 38 digits) because a plain numeric
// literal would be a Float64, strings via QuoteCHString, times as
// toDateTime64('...', 6, 'UTC'), UUIDs as toUUID('...'), bools as 1 or 0,
// nil (and nil pointers) as NULL, slices as [a, b]. Other types are an
// error.
func Literal(v any) (string, error) {
	b, err := appendLiteral(nil, v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendLiteral appends v's literal to b.
func appendLiteral(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "NULL"...), nil
	case string:
		return append(b, QuoteCHString(x)...), nil
	case JSON:
		return append(b, QuoteCHString(string(x))...), nil
	case bool:
		return append(b, boolDigit(x)...), nil
	case float32:
		return appendFloat(b, float64(x), 64), nil
	case float64:
		return appendFloat(b, x, 64), nil
	case decimal.Decimal:
		return appendDecimalLiteral(b, x)
	case time.Time:
		b = append(b, "toDateTime64('"...)
		return append(appendTime(b, x), "', 6, 'UTC')"...), nil
	case uuid.UUID:
		return append(b, "toUUID('"+x.String()+"')"...), nil
	}
	if s, ok := integerText(v); ok {
		return append(b, s...), nil
	}
	return appendLiteralReflect(b, v)
}

// appendLiteralReflect handles pointers and slices.
func appendLiteralReflect(b []byte, v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			return append(b, "NULL"...), nil
		}
		return appendLiteral(b, rv.Elem().Interface())
	case reflect.Slice, reflect.Array:
		b = append(b, '[')
		for i := range rv.Len() {
			if i > 0 {
				b = append(b, ", "...)
			}
			var err error
			if b, err = appendLiteral(b, rv.Index(i).Interface()); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return nil, fmt.Errorf("no ClickHouse literal for a value of type %T", v)
}

// appendDecimalLiteral writes toDecimal128('text', scale), or
// toDecimal256 for more than 38 digits (which only a server with
// Decimal256 holds); the scale is the number of fractional digits, so the
// conversion is exact.
func appendDecimalLiteral(b []byte, d decimal.Decimal) ([]byte, error) {
	text := decimalText(d)
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(text, "-"), ".")
	fn := "toDecimal128('"
	switch digits := len(strings.TrimLeft(intPart, "0")) + len(frac); {
	case digits > maxDecimal256:
		return nil, fmt.Errorf("decimal %s has more than %d digits", text, maxDecimal256)
	case digits > maxDecimal128:
		fn = "toDecimal256('"
	}
	b = append(b, fn+text+"', "...)
	b = strconv.AppendInt(b, int64(len(frac)), 10)
	return append(b, ')'), nil
}

// Canonical is a deterministic text of a value, produced by Convert or
// scanned from ClickHouse by clickhouse-go, such that a PostgreSQL-side
// value and its ClickHouse-side counterpart have equal texts exactly when
// they are the same value. Pointers are followed; nil is \N; integers of
// any width and bools (as 1 and 0) are decimal; floats are shortest
// round-trip text with nan, inf and -inf; decimals are normalized (1.50 and
// 1.5 are "1.5"); times are UTC "2006-01-02 15:04:05.999999"; UUIDs are
// their 36-byte form; JSON is CanonicalJSON; slices are [a,b,\N] with
// strings quoted. A top-level
// string or []byte is its raw bytes, so the string `\N` reads like NULL.
func Canonical(v any) string {
	return string(appendCanonical(nil, v, false))
}

// appendCanonical appends v's canonical text; inArray quotes strings.
func appendCanonical(b []byte, v any, inArray bool) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, `\N`...)
	case string:
		return appendCanonicalString(b, x, inArray)
	case []byte:
		return appendCanonicalString(b, string(x), inArray)
	case JSON:
		return appendCanonicalString(b, CanonicalJSON(string(x)), inArray)
	case bool:
		return append(b, boolDigit(x)...)
	case float32:
		return appendFloat(b, float64(x), 32)
	case float64:
		return appendFloat(b, x, 64)
	case decimal.Decimal:
		return append(b, decimalText(x)...)
	case time.Time:
		return appendTime(b, x)
	case uuid.UUID:
		return append(b, x.String()...)
	}
	if s, ok := integerText(v); ok {
		return append(b, s...)
	}
	return appendCanonicalReflect(b, v, inArray)
}

// appendCanonicalReflect handles pointers, slices and unknown types.
func appendCanonicalReflect(b []byte, v any, inArray bool) []byte {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			return append(b, `\N`...)
		}
		return appendCanonical(b, rv.Elem().Interface(), inArray)
	case reflect.Slice, reflect.Array:
		b = append(b, '[')
		for i := range rv.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, rv.Index(i).Interface(), true)
		}
		return append(b, ']')
	}
	return fmt.Appendf(b, "%v", v)
}

// appendCanonicalString writes s raw, or quoted inside an array.
func appendCanonicalString(b []byte, s string, quoted bool) []byte {
	if quoted {
		return append(b, QuoteCHString(s)...)
	}
	return append(b, s...)
}

// integerText formats any Go integer type in base 10.
func integerText(v any) (string, bool) {
	switch x := v.(type) {
	case int:
		return strconv.FormatInt(int64(x), 10), true
	case int8:
		return strconv.FormatInt(int64(x), 10), true
	case int16:
		return strconv.FormatInt(int64(x), 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint:
		return strconv.FormatUint(uint64(x), 10), true
	case uint8:
		return strconv.FormatUint(uint64(x), 10), true
	case uint16:
		return strconv.FormatUint(uint64(x), 10), true
	case uint32:
		return strconv.FormatUint(uint64(x), 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case *big.Int:
		if x != nil {
			return x.String(), true
		}
	}
	return "", false
}

func boolDigit(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// appendFloat writes the shortest text that reads back as f at the given
// bit size, with nan, inf and -inf for the special values.
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// decimalText is d in fixed-point notation without trailing fractional
// zeros, independent of the decimal package's formatting settings.
func decimalText(d decimal.Decimal) string {
	coef, exp := d.Coefficient(), int(d.Exponent())
	if coef.Sign() == 0 {
		return "0"
	}
	digits := coef.String()
	sign := ""
	if digits[0] == '-' {
		sign, digits = "-", digits[1:]
	}
	for exp < 0 && digits[len(digits)-1] == '0' {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	if exp >= 0 {
		return sign + digits + strings.Repeat("0", exp)
	}
	if point := len(digits) + exp; point > 0 {
		return sign + digits[:point] + "." + digits[point:]
	}
	return sign + "0." + strings.Repeat("0", -exp-len(digits)) + digits
}

// appendTime writes t in UTC as "Y-MM-DD HH:MM:SS[.ffffff]" (fraction
// without trailing zeros, sub-microsecond digits dropped; negative years
// with a minus sign).
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 {
		b, year = append(b, '-'), -year
	}
	b = appendPadded(b, year, 4)
	b = append(b, '-')
	b = appendPadded(b, int(month), 2)
	b = append(b, '-')
	b = appendPadded(b, day, 2)
	b = append(b, ' ')
	b = appendPadded(b, t.Hour(), 2)
	b = append(b, ':')
	b = appendPadded(b, t.Minute(), 2)
	b = append(b, ':')
	b = appendPadded(b, t.Second(), 2)
	if us := t.Nanosecond() / 1000; us != 0 {
		frac := strings.TrimRight(fmt.Sprintf("%06d", us), "0")
		b = append(append(b, '.'), frac...)
	}
	return b
}

// appendPadded writes n (n >= 0) with at least width digits.
func appendPadded(b []byte, n, width int) []byte {
	s := strconv.Itoa(n)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// AppendEncoded appends v's Canonical form to buf, prefixed with its length,
// so that a run of encoded values can be split only one way: two rows
// encode alike exactly when their values are canonically equal. NULL is
// "N", which no length starts with (its Canonical form \N is also a text's).
func AppendEncoded(buf []byte, v any) []byte {
	if v == nil {
		return append(buf, 'N')
	}
	return appendLengthPrefixed(buf, v)
}

// AppendRowKeyValue is AppendEncoded for the row key of table t (a FullRow
// table): before DistinctNull, NULL encoded as the text \N, and a table
// keyed so keeps that encoding, or its rows' keys would change under it.
func AppendRowKeyValue(buf []byte, v any, t Table) []byte {
	if v == nil && !t.DistinctNull {
		return appendLengthPrefixed(buf, v)
	}
	return AppendEncoded(buf, v)
}

func appendLengthPrefixed(buf []byte, v any) []byte {
	c := Canonical(v)
	buf = strconv.AppendInt(buf, int64(len(c)), 10)
	buf = append(buf, ':')
	return append(buf, c...)
}
