package kafka

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// maxSafeInt is the largest integer every JSON reader (JavaScript's double
// included) holds exactly; larger ones are written as strings.
const maxSafeInt = 1<<53 - 1

// appendJSONArray appends the slice v as a JSON array, a nil element as
// null and the others through elem.
func appendJSONArray(b []byte, v any, elem func(b []byte, e any) ([]byte, error)) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return nil, fmt.Errorf("want an array, got %T", v)
	}
	b = append(b, '[')
	for i := range rv.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		e := rv.Index(i)
		var err error
		if e.Kind() == reflect.Pointer && e.IsNil() {
			b = append(b, "null"...)
		} else if b, err = elem(b, reflect.Indirect(e).Interface()); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// appendValue appends the JSON of one value the publisher was handed (a Go
// value of schema.ColumnMap.Convert under the wire capabilities).
func appendValue(b []byte, k wireKind, array bool, v any) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	if array {
		return appendJSONArray(b, v, func(b []byte, e any) ([]byte, error) { return appendValue(b, k, false, e) })
	}
	switch x := v.(type) {
	case string:
		if k == kindBytea {
			return appendString(b, base64.StdEncoding.EncodeToString([]byte(x))), nil
		}
		return appendString(b, x), nil
	case decimal.Decimal:
		if x.Exponent() < 0 { // keep the scale: numeric(10,2)'s 1.50 stays "1.50"
			return appendString(b, x.StringFixed(-x.Exponent())), nil
		}
		return appendString(b, x.String()), nil
	case uuid.UUID:
		return appendString(b, x.String()), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case uint8:
		return strconv.AppendBool(b, x != 0), nil
	case float32:
		return appendFloat(b, float64(x), 32), nil
	case float64:
		return appendFloat(b, x, 64), nil
	case int16:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		if k == kindDate {
			return appendString(b, dateISO(x)), nil
		}
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return appendInt64(b, k, x), nil
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint64:
		if k == kindLSN {
			return appendString(b, fmt.Sprintf("%X/%X", x>>32, uint32(x))), nil
		}
		if x > maxSafeInt {
			return appendString(b, strconv.FormatUint(x, 10)), nil
		}
		return strconv.AppendUint(b, x, 10), nil
	}
	return nil, fmt.Errorf("no envelope encoding for a value of type %T", v)
}

func appendInt64(b []byte, k wireKind, x int64) []byte {
	switch k {
	case kindTimestamp, kindTimestampTZ:
		return appendString(b, timestampISO(x, k == kindTimestampTZ))
	case kindTime:
		return appendString(b, clock(x))
	}
	if x > maxSafeInt || x < -maxSafeInt {
		return appendString(b, strconv.FormatInt(x, 10))
	}
	return strconv.AppendInt(b, x, 10)
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// appendFloat writes the shortest text that reads back as the same float;
// NaN and the infinities, which JSON has no number for, as strings.
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// dateISO writes days since 1970-01-01 as an ISO 8601 date with
// astronomical years (0000 is 1 BC); years above 9999 get a "+" and below
// 0000 a "-", as ISO 8601's expanded form. PostgreSQL's infinities, which
// the wire form holds as the int32 extremes, are "infinity" and
// "-infinity".
func dateISO(days int32) string {
	switch days {
	case math.MaxInt32:
		return "infinity"
	case math.MinInt32:
		return "-infinity"
	}
	return isoDate(time.Unix(int64(days)*86400, 0).UTC())
}

func isoDate(t time.Time) string {
	y := t.Year()
	var ys string
	switch {
	case y > 9999:
		ys = "+" + strconv.Itoa(y)
	case y < 0:
		ys = fmt.Sprintf("-%04d", -y)
	default:
		ys = fmt.Sprintf("%04d", y)
	}
	return fmt.Sprintf("%s-%02d-%02d", ys, t.Month(), t.Day())
}

// timestampISO writes microseconds since 1970-01-01 UTC as an ISO 8601
// date and time with six fractional digits, and "Z" for timestamptz.
func timestampISO(us int64, tz bool) string {
	switch us {
	case math.MaxInt64:
		return "infinity"
	case math.MinInt64:
		return "-infinity"
	}
	t := time.UnixMicro(us).UTC()
	s := isoDate(t) + "T" + clock(int64(t.Hour()*3600+t.Minute()*60+t.Second())*1e6+int64(t.Nanosecond()/1000))
	if tz {
		s += "Z"
	}
	return s
}

// clock writes microseconds since midnight as HH:MM:SS.ffffff (24:00:00 is
// a valid time in PostgreSQL).
func clock(us int64) string {
	s := us / 1e6
	return fmt.Sprintf("%02d:%02d:%02d.%06d", s/3600, s/60%60, s%60, us%1e6)
}

// pgText turns one envelope value back into PostgreSQL's text output, which
// the loader converts with its own server's mapping exactly as the direct
// path converts what pgoutput sends; null is SQL NULL.
func pgText(k wireKind, array bool, raw json.RawMessage) (text []byte, null bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true, nil
	}
	if array {
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, false, fmt.Errorf("want a JSON array: %w", err)
		}
		b := []byte{'{'}
		for i, e := range elems {
			if i > 0 {
				b = append(b, ',')
			}
			t, null, err := pgText(k, false, e)
			if err != nil {
				return nil, false, err
			}
			if null {
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
		return append(b, '}'), false, nil
	}
	if raw[0] != '"' {
		return scalarText(k, string(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false, err
	}
	t, err := stringText(k, s)
	return t, false, err
}

// scalarText is the text of a JSON number or boolean.
func scalarText(k wireKind, raw string) ([]byte, bool, error) {
	switch k {
	case kindBool:
		switch raw {
		case "true":
			return []byte("t"), false, nil
		case "false":
			return []byte("f"), false, nil
		}
	case kindInt, kindFloat:
		return []byte(raw), false, nil
	}
	return nil, false, fmt.Errorf("unexpected JSON value %.40s", raw)
}

// stringText is the text of a JSON string.
func stringText(k wireKind, s string) ([]byte, error) {
	switch k {
	case kindBytea:
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("bytea: %w", err)
		}
		return fmt.Appendf(nil, `\x%x`, raw), nil
	case kindDate:
		if s == "infinity" || s == "-infinity" {
			return []byte(s), nil
		}
		t, err := parseISO(s, false)
		if err != nil {
			return nil, err
		}
		return []byte(pgDate(t)), nil
	case kindTimestamp, kindTimestampTZ:
		if s == "infinity" || s == "-infinity" {
			return []byte(s), nil
		}
		t, err := parseISO(s, true)
		if err != nil {
			return nil, err
		}
		return []byte(pgTimestamp(t, k == kindTimestampTZ)), nil
	}
	return []byte(s), nil
}

// parseISO reads what dateISO or timestampISO wrote.
func parseISO(s string, withTime bool) (time.Time, error) {
	bad := fmt.Errorf("invalid ISO 8601 value %q", s)
	sign, body := 1, s
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		sign, body = -1, rest
	} else {
		body = strings.TrimPrefix(s, "+")
	}
	ys, rest, ok := strings.Cut(body, "-")
	y, err := strconv.Atoi(ys)
	if !ok || err != nil || len(rest) < 5 {
		return time.Time{}, bad
	}
	m, err1 := strconv.Atoi(rest[0:2])
	d, err2 := strconv.Atoi(rest[3:5])
	if err1 != nil || err2 != nil || rest[2] != '-' {
		return time.Time{}, bad
	}
	var us int64
	if withTime {
		// Six fractional digits as ferry wrote them before, or as few as
		// Debezium's ZonedTimestamp has (none when zero).
		c := strings.TrimSuffix(rest[5:], "Z")
		if len(c) < 9 || c[0] != 'T' || (len(c) > 9 && (c[9] != '.' || len(c) > 16)) {
			return time.Time{}, bad
		}
		h, e1 := strconv.Atoi(c[1:3])
		mi, e2 := strconv.Atoi(c[4:6])
		se, e3 := strconv.Atoi(c[7:9])
		f, e4 := 0, error(nil)
		if len(c) > 10 {
			f, e4 = strconv.Atoi((c[10:] + "00000")[:6])
		}
		if e1 != nil || e2 != nil || e3 != nil || e4 != nil {
			return time.Time{}, bad
		}
		us = int64((h*60+mi)*60+se)*1e6 + int64(f)
	} else if len(rest) != 5 {
		return time.Time{}, bad
	}
	t := time.Date(sign*y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	return t.Add(time.Duration(us) * time.Microsecond), nil
}

// pgDate writes a date as PostgreSQL does (DateStyle ISO): years before 1
// as "YYYY-MM-DD BC".
func pgDate(t time.Time) string {
	y, bc := t.Year(), ""
	if y < 1 {
		y, bc = 1-y, " BC"
	}
	return fmt.Sprintf("%04d-%02d-%02d%s", y, t.Month(), t.Day(), bc)
}

// pgTimestamp writes a timestamp as PostgreSQL does, with all six
// fractional digits and, for timestamptz, the UTC offset.
func pgTimestamp(t time.Time, tz bool) string {
	d := pgDate(t)
	body, bc := strings.CutSuffix(d, " BC")
	s := fmt.Sprintf("%s %02d:%02d:%02d.%06d", body, t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1000)
	if tz {
		s += "+00"
	}
	if bc {
		s += " BC"
	}
	return s
}

// errEncoding marks values the envelope cannot carry; retrying cannot help.
var errEncoding = errors.New("cannot encode")
