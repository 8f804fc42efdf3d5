package schema

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// BinaryBuilder is a ColumnBuilder that also takes its column's values in
// PostgreSQL's binary form (COPY ... (FORMAT binary), the type's send
// function). AppendBinary gives the value and the error Append gives for
// the same value in text form: a value outside the fast paths below is
// written out as PostgreSQL's text and parsed as text.
type BinaryBuilder interface {
	ColumnBuilder
	AppendBinary(data []byte, null bool) error
}

var (
	_ BinaryBuilder = (*typedBuilder[int64])(nil)
	_ BinaryBuilder = (*wireBuilder[time.Time])(nil)
	_ BinaryBuilder = (*stringBuilder)(nil)
	_ BinaryBuilder = (*anyBuilder)(nil)
)

// Binary reports whether the column's builder takes PostgreSQL's binary
// form of its type: NewBuilder's builder is a BinaryBuilder of every
// column, but only these have a reader (Map sets it for the typed
// builders, and for an enum's []any one).
func (c ColumnMap) Binary() bool { return c.bin != nil }

// noBinary is AppendBinary's error on a column Binary turns down.
func (c ColumnMap) noBinary() error {
	return fmt.Errorf("column %s: ferry reads its type as text only (a bug: the copy asked for binary)", QuotePG(c.Name))
}

// A binary reader of a kind, by the builder that uses it:
//   - binParser[T]: a typedBuilder[T]'s values;
//   - binWire: a wireBuilder's wire integers;
//   - binText: a stringBuilder's text, appended to its buffer (or the
//     text an anyBuilder converts).
type (
	binParser[T any] func(data []byte) (T, error)
	binWire          func(data []byte) (int64, error)
	binText          func(dst, data []byte) ([]byte, error)
)

// PostgreSQL's epoch of dates and timestamps, 2000-01-01, in days and
// microseconds since 1970-01-01.
const (
	pgEpochDays   = 10957
	pgEpochMicros = pgEpochDays * microsPerDay
)

// binaryOf is the binary reader of a scalar kind of PostgreSQL type oid,
// or nil for types ferry reads as text only.
func binaryOf(oid uint32, caps Capabilities) any {
	switch oid {
	case oidInt2:
		return binParser[int16](func(b []byte) (int16, error) {
			v, err := fixed(b, 2, "int2")
			return int16(v), err
		})
	case oidInt4:
		return binParser[int32](func(b []byte) (int32, error) {
			v, err := fixed(b, 4, "int4")
			return int32(v), err
		})
	case oidInt8:
		return binParser[int64](func(b []byte) (int64, error) { return fixed(b, 8, "int8") })
	case oidFloat4:
		return binParser[float32](binFloat32)
	case oidFloat8:
		return binParser[float64](binFloat64)
	case oidBool:
		if caps.Bool {
			return binParser[bool](func(b []byte) (bool, error) {
				v, err := fixed(b, 1, "bool")
				return v != 0, err
			})
		}
		return binParser[uint8](func(b []byte) (uint8, error) {
			v, err := fixed(b, 1, "bool")
			return uint8(min(v, 1)), err
		})
	case oidUUID:
		return binParser[uuid.UUID](func(b []byte) (uuid.UUID, error) {
			if len(b) != 16 {
				return uuid.UUID{}, binLength("uuid", b)
			}
			return uuid.UUID(b), nil
		})
	case oidBytea:
		return binParser[string](func(b []byte) (string, error) { return string(b), nil })
	case oidText, oidVarchar, oidBpchar, oidName, oidJSON:
		return binText(appendBytes)
	case oidJSONB:
		return binText(func(dst, b []byte) ([]byte, error) {
			if len(b) == 0 || b[0] != 1 {
				return dst, fmt.Errorf("binary jsonb of an unknown version (want 1)")
			}
			return append(dst, b[1:]...), nil
		})
	case oidTime:
		return binParser[int64](func(b []byte) (int64, error) {
			us, err := fixed(b, 8, "time")
			if err == nil && (us < 0 || us > microsPerDay) {
				err = fmt.Errorf("binary time of %d microseconds", us)
			}
			return us, err
		})
	case oidDate:
		return binaryDate(caps)
	case oidTimestamp, oidTimestamptz:
		return binaryTimestamp(oid == oidTimestamptz, caps)
	}
	return nil
}

// appendBytes reads a type whose binary form is its text.
func appendBytes(dst, b []byte) ([]byte, error) { return append(dst, b...), nil }

// fixed is the big-endian integer of a value of n bytes.
func fixed(b []byte, n int, typ string) (int64, error) {
	if len(b) != n {
		return 0, binLength(typ, b)
	}
	switch n {
	case 1:
		return int64(b[0]), nil
	case 2:
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

func binLength(typ string, b []byte) error {
	return fmt.Errorf("binary %s value of %d bytes", typ, len(b))
}

// binFloat64 is float8's value; any NaN is Go's NaN, as the text's is.
func binFloat64(b []byte) (float64, error) {
	v, err := fixed(b, 8, "float8")
	f := math.Float64frombits(uint64(v))
	if math.IsNaN(f) {
		f = math.NaN()
	}
	return f, err
}

func binFloat32(b []byte) (float32, error) {
	if len(b) != 4 {
		return 0, binLength("float4", b)
	}
	f := math.Float32frombits(binary.BigEndian.Uint32(b))
	if f != f {
		f = float32(math.NaN())
	}
	return f, nil
}

// binaryDate reads date's days since 2000-01-01 (math.MinInt32 and
// math.MaxInt32 the infinities) as the text parser of the kind would.
func binaryDate(caps Capabilities) any {
	days := func(b []byte) (int64, bool, error) {
		v, err := fixed(b, 4, "date")
		finite := v != math.MinInt32 && v != math.MaxInt32
		return v + pgEpochDays, finite, err
	}
	if caps.Date32 {
		return binParser[time.Time](func(b []byte) (time.Time, error) {
			d, finite, err := days(b)
			if err != nil || !finite || d < minCHDay || d > maxCHDay {
				return viaText(err, parseDate32, appendDateText(nil, d, finite))
			}
			return time.Unix(d*86_400, 0).UTC(), nil
		})
	}
	return binParser[int32](func(b []byte) (int32, error) {
		d, finite, err := days(b)
		if err != nil || !finite {
			return viaText(err, parseDateDays, appendDateText(nil, d, finite))
		}
		return int32(d), nil // any finite date fits (parseDateDays)
	})
}

// binaryTimestamp reads timestamp's microseconds since 2000-01-01
// (math.MinInt64 and math.MaxInt64 the infinities) as the text parser of
// the kind would.
func binaryTimestamp(tz bool, caps Capabilities) any {
	micros := func(b []byte) (us int64, fast bool, err error) {
		v, err := fixed(b, 8, "timestamp")
		if err != nil || v == math.MinInt64 || v == math.MaxInt64 || v > math.MaxInt64-pgEpochMicros {
			return v, false, err
		}
		return v + pgEpochMicros, true, nil
	}
	slow := func(b []byte, err error) []byte {
		if err != nil {
			return nil
		}
		return appendTimestampText(nil, int64(binary.BigEndian.Uint64(b)), tz)
	}
	if caps.DateTime64 {
		return binWire(func(b []byte) (int64, error) {
			us, fast, err := micros(b)
			if !fast || us < minCHDay*microsPerDay || us >= (maxCHDay+1)*microsPerDay {
				return viaText(err, parseDateTime64Micros, slow(b, err))
			}
			return us, nil
		})
	}
	return binParser[int64](func(b []byte) (int64, error) {
		us, fast, err := micros(b)
		if !fast {
			return viaText(err, parseTimestampMicros, slow(b, err))
		}
		return us, nil
	})
}

// viaText is err when the binary value could not be read, else what
// parsing text (the value in PostgreSQL's text form, which the fast path
// left) gives: the text path's value or error.
func viaText[T any](err error, parse func([]byte) (T, error), text []byte) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return parse(text)
}

// binaryNumeric is the reader of numeric(p, s) into Decimal(p, s):
// for p <= 18 scaled directly, else through the text numeric_out gives.
func binaryNumeric(p, s int) any {
	if p > maxScaled {
		parse := decimalParser(p, s)
		return binParser[decimal.Decimal](func(b []byte) (decimal.Decimal, error) {
			text, err := appendNumericText(nil, b)
			if err != nil {
				return decimal.Decimal{}, err
			}
			return parse(text)
		})
	}
	parse := scaledParser(p, s)
	return binWire(func(b []byte) (int64, error) {
		if v, ok := scaledNumeric(b, p, s); ok {
			return v, nil
		}
		text, err := appendNumericText(nil, b)
		if err != nil {
			return 0, err
		}
		return parse(text)
	})
}

// numeric's binary header: digit count, weight of the first digit (in
// powers of 10000), sign, display scale; then the base-10000 digits.
const (
	numericPos  = 0x0000
	numericNeg  = 0x4000
	numericNaN  = 0xC000
	numericPInf = 0xD000
	numericNInf = 0xF000
)

type numericHeader struct {
	ndigits, weight, dscale int
	sign                    uint16
	digits                  []byte // 2 bytes a digit
}

func readNumeric(b []byte) (numericHeader, error) {
	if len(b) < 8 {
		return numericHeader{}, binLength("numeric", b)
	}
	h := numericHeader{
		ndigits: int(int16(binary.BigEndian.Uint16(b[0:]))),
		weight:  int(int16(binary.BigEndian.Uint16(b[2:]))),
		sign:    binary.BigEndian.Uint16(b[4:]),
		dscale:  int(binary.BigEndian.Uint16(b[6:])),
		digits:  b[8:],
	}
	if h.ndigits < 0 || len(h.digits) != 2*h.ndigits {
		return numericHeader{}, binLength("numeric", b)
	}
	return h, nil
}

func (h numericHeader) digit(i int) int64 {
	if i < 0 || i >= h.ndigits {
		return 0
	}
	return int64(binary.BigEndian.Uint16(h.digits[2*i:]))
}

// scaledNumeric is binary numeric b times 10^s when Decimal(p, s), p <=
// 18, holds it exactly; ok is false otherwise (the text path then gives
// the error).
func scaledNumeric(b []byte, p, s int) (int64, bool) {
	h, err := readNumeric(b)
	if err != nil || (h.sign != numericPos && h.sign != numericNeg) {
		return 0, false
	}
	limit := pow10[p]
	var v int64
	for i := range h.ndigits {
		d := h.digit(i)
		e := 4*(h.weight-i) + s // the digit's power of ten in units of 10^-s
		switch {
		case d == 0:
		case d > 9999:
			return 0, false
		case e < 0:
			if e < -4 || d%pow10[-e] != 0 {
				return 0, false // digits past the scale
			}
			v += d / pow10[-e]
		case e >= p || d > (limit-1)/pow10[e]:
			return 0, false // d*10^e alone is past the precision (and may not fit an int64)
		default:
			v += d * pow10[e]
		}
		if v >= limit {
			return 0, false
		}
	}
	if h.sign == numericNeg {
		v = -v
	}
	return v, true
}

// pow10 holds 10^0 to 10^18.
var pow10 = func() (t [maxScaled + 1]int64) {
	t[0] = 1
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 10
	}
	return t
}()

// appendNumericText appends numeric_out's text of binary numeric b.
func appendNumericText(dst, b []byte) ([]byte, error) {
	h, err := readNumeric(b)
	if err != nil {
		return dst, err
	}
	switch h.sign {
	case numericNaN:
		return append(dst, "NaN"...), nil
	case numericPInf:
		return append(dst, "Infinity"...), nil
	case numericNInf:
		return append(dst, "-Infinity"...), nil
	case numericNeg:
		dst = append(dst, '-')
	case numericPos:
	default:
		return dst, fmt.Errorf("binary numeric of sign %#x", h.sign)
	}
	d := 0
	if h.weight < 0 {
		d = h.weight + 1
		dst = append(dst, '0')
	} else {
		for ; d <= h.weight; d++ {
			if d == 0 {
				dst = strconv.AppendInt(dst, h.digit(d), 10)
			} else {
				dst = appendPadded(dst, int(h.digit(d)), 4)
			}
		}
	}
	if h.dscale > 0 {
		dst = append(dst, '.')
		end := len(dst) + h.dscale
		for i := 0; i < h.dscale; i += 4 {
			dst = appendPadded(dst, int(h.digit(d)), 4)
			d++
		}
		dst = dst[:end]
	}
	return dst, nil
}

// appendDateText appends date_out's ISO text of days since 1970.
func appendDateText(dst []byte, days int64, finite bool) []byte {
	if !finite {
		if days > 0 {
			return append(dst, "infinity"...)
		}
		return append(dst, "-infinity"...)
	}
	y, m, d := civilFromDays(days)
	dst = appendYear(dst, y, m, d)
	if y <= 0 {
		dst = append(dst, " BC"...)
	}
	return dst
}

// appendTimestampText appends timestamp_out's (timestamptz_out's in UTC)
// ISO text of v microseconds since 2000-01-01.
func appendTimestampText(dst []byte, v int64, tz bool) []byte {
	switch v {
	case math.MaxInt64:
		return append(dst, "infinity"...)
	case math.MinInt64:
		return append(dst, "-infinity"...)
	}
	days, us := v/microsPerDay, v%microsPerDay
	if us < 0 {
		days, us = days-1, us+microsPerDay
	}
	y, m, d := civilFromDays(days + pgEpochDays)
	dst = appendYear(dst, y, m, d)
	secs := us / microsPerSecond
	dst = append(dst, ' ')
	dst = appendPadded(dst, int(secs/3600), 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, int(secs/60%60), 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, int(secs%60), 2)
	if frac := us % microsPerSecond; frac != 0 {
		digits := appendPadded([]byte{'.'}, int(frac), 6)
		for digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		dst = append(dst, digits...)
	}
	if tz {
		dst = append(dst, "+00"...)
	}
	if y <= 0 {
		dst = append(dst, " BC"...)
	}
	return dst
}

// appendYear appends "YYYY-MM-DD", a year y <= 0 as 1-y (the BC year).
func appendYear(dst []byte, y, m, d int64) []byte {
	if y <= 0 {
		y = 1 - y
	}
	dst = appendPadded(dst, int(y), 4)
	dst = append(dst, '-')
	dst = appendPadded(dst, int(m), 2)
	dst = append(dst, '-')
	return appendPadded(dst, int(d), 2)
}

// civilFromDays is daysFromCivil's inverse: the proleptic Gregorian date
// (astronomical year) of days since 1970-01-01.
func civilFromDays(days int64) (y, m, d int64) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}
