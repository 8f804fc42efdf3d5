package schema

import (
	"bytes"
	"encoding/hex"
	"strconv"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// parser turns PostgreSQL's text form of one value into a Go value.
type parser[T any] func(text []byte) (T, error)

// scalarConv makes a converter of a parser.
func scalarConv[T any](p parser[T]) converter {
	return func(text []byte) (any, error) {
		v, err := p(text)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
}

// parseInt parses a base-10 integer of the given bit size. string(text)
// does not escape here, so short inputs are not copied to the heap.
func parseInt(typ string, text []byte, bits int) (int64, error) {
	v, err := strconv.ParseInt(string(text), 10, bits)
	if err != nil {
		return 0, invalid(typ, text)
	}
	return v, nil
}

func parseInt16(text []byte) (int16, error) {
	v, err := parseInt("int2", text, 16)
	return int16(v), err
}

func parseInt32(text []byte) (int32, error) {
	v, err := parseInt("int4", text, 32)
	return int32(v), err
}

func parseInt64(text []byte) (int64, error) { return parseInt("int8", text, 64) }

// parseFloat64 parses float8 text, including NaN, Infinity and -Infinity.
func parseFloat64(text []byte) (float64, error) {
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return 0, invalid("float8", text)
	}
	return v, nil
}

// parseFloat32 parses float4 text; the result is the float32 nearest to
// the decimal text, which PostgreSQL prints so that it reads back exactly.
func parseFloat32(text []byte) (float32, error) {
	v, err := strconv.ParseFloat(string(text), 32)
	if err != nil {
		return 0, invalid("float4", text)
	}
	return float32(v), nil
}

// parseString copies the text: PostgreSQL's text form is the value.
func parseString(text []byte) (string, error) { return string(text), nil }

// parseBool parses 't' and 'f'.
func parseBool(text []byte) (bool, error) {
	if len(text) == 1 {
		switch text[0] {
		case 't':
			return true, nil
		case 'f':
			return false, nil
		}
	}
	return false, invalid("bool", text)
}

// parseBoolUint8 parses 't' and 'f' as 1 and 0.
func parseBoolUint8(text []byte) (uint8, error) {
	v, err := parseBool(text)
	if v {
		return 1, err
	}
	return 0, err
}

// parseUUID parses uuid text.
func parseUUID(text []byte) (uuid.UUID, error) {
	u, err := uuid.ParseBytes(text)
	if err != nil {
		return uuid.UUID{}, invalid("uuid", text)
	}
	return u, nil
}

// parseBytea decodes bytea text into its raw bytes: the hex form "\x0a0b"
// (PostgreSQL's default) or the older escape form.
func parseBytea(text []byte) (string, error) {
	if hexText, ok := bytes.CutPrefix(text, []byte(`\x`)); ok {
		out := make([]byte, hex.DecodedLen(len(hexText)))
		if _, err := hex.Decode(out, hexText); err != nil {
			return "", invalid("bytea", text)
		}
		return string(out), nil
	}
	return parseByteaEscape(text)
}

// parseByteaEscape decodes bytea's escape form: "\\" is a backslash,
// "\ooo" an octal byte, anything else the byte itself.
func parseByteaEscape(text []byte) (string, error) {
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		switch {
		case i+1 < len(text) && text[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(text) && isOctal(text[i+1]) && isOctal(text[i+2]) && isOctal(text[i+3]) && text[i+1] <= '3':
			out = append(out, (text[i+1]-'0')<<6|(text[i+2]-'0')<<3|(text[i+3]-'0'))
			i += 3
		default:
			return "", invalid("bytea", text)
		}
	}
	return string(out), nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// decimalParser parses numeric text into a decimal.Decimal that fits
// Decimal(p, s): at most p-s integer digits and s fractional ones (more
// fractional digits are accepted only when they are zeros). NaN and the
// infinities are unrepresentable.
func decimalParser(p, s int) parser[decimal.Decimal] {
	check := decimalCheck(p, s)
	return func(text []byte) (decimal.Decimal, error) {
		if err := check(text); err != nil {
			return decimal.Decimal{}, err
		}
		return newDecimal(text)
	}
}

// decimalCheck returns the check of decimalParser(p, s): nil for numeric
// text whose value Decimal(p, s) holds exactly.
func decimalCheck(p, s int) func(text []byte) error {
	chType := "Decimal(" + strconv.Itoa(p) + ", " + strconv.Itoa(s) + ")"
	return func(text []byte) error {
		intDigits, fracDigits, ok := numericShape(text)
		if !ok {
			if isSpecialNumeric(text) {
				return unrepresentable(chType, text)
			}
			return invalid("numeric", text)
		}
		if intDigits > p-s || fracDigits > s {
			return unrepresentable(chType, text)
		}
		return nil
	}
}

// newDecimal makes the decimal of validated numeric text, without big
// arithmetic when the digits fit an int64.
func newDecimal(text []byte) (decimal.Decimal, error) {
	var coef int64
	exp, digits, seenPoint := int32(0), 0, false
	for _, c := range text {
		switch {
		case c == '.':
			seenPoint = true
		case c >= '0' && c <= '9':
			coef = coef*10 + int64(c-'0')
			digits++
			if seenPoint {
				exp--
			}
		}
	}
	if digits > 18 {
		d, err := decimal.NewFromString(string(text))
		if err != nil {
			return decimal.Decimal{}, invalid("numeric", text)
		}
		return d, nil
	}
	if text[0] == '-' {
		coef = -coef
	}
	return decimal.New(coef, exp), nil
}

// numericShape checks text is [-]digits[.digits] and counts the integer
// digits (without leading zeros) and the fractional ones (without trailing
// zeros).
func numericShape(text []byte) (intDigits, fracDigits int, ok bool) {
	if len(text) > 0 && (text[0] == '-' || text[0] == '+') {
		text = text[1:]
	}
	intPart, fracPart, _ := bytes.Cut(text, []byte{'.'})
	if len(intPart)+len(fracPart) == 0 || !allDigits(intPart) || !allDigits(fracPart) {
		return 0, 0, false
	}
	intPart = bytes.TrimLeft(intPart, "0")
	fracPart = bytes.TrimRight(fracPart, "0")
	return len(intPart), len(fracPart), true
}

// isSpecialNumeric reports NaN, Infinity and -Infinity.
func isSpecialNumeric(text []byte) bool {
	switch string(text) {
	case "NaN", "Infinity", "-Infinity", "+Infinity":
		return true
	}
	return false
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
