package schema

import (
	"encoding/binary"
	"testing"
)

// numericBinary is numeric_send's form of base-10000 digits.
func numericBinary(weight int, sign uint16, dscale int, digits ...uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(digits)))
	b = binary.BigEndian.AppendUint16(b, uint16(int16(weight)))
	b = binary.BigEndian.AppendUint16(b, sign)
	b = binary.BigEndian.AppendUint16(b, uint16(dscale))
	for _, d := range digits {
		b = binary.BigEndian.AppendUint16(b, d)
	}
	return b
}

// TestScaledNumeric: the fast path of binary numeric into Decimal(p <= 18)
// takes exactly the values the column holds; the others (which a column of
// that typmod never sends, or does not fit) go the text way, whose check
// refuses them with the text parser's error.
func TestScaledNumeric(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		p, s int
		want int64
		ok   bool
	}{
		{"1.05", numericBinary(0, numericPos, 2, 1, 500), 10, 2, 105, true},
		{"-12345678.9", numericBinary(1, numericNeg, 1, 1234, 5678, 9000), 10, 2, -1234567890, true},
		{"0", numericBinary(0, numericPos, 2), 10, 2, 0, true},
		{"1.005 past the scale", numericBinary(0, numericPos, 3, 1, 50), 10, 2, 0, false},
		{"10^8 past the precision", numericBinary(2, numericPos, 0, 1), 10, 2, 0, false},
		{"99999999.99", numericBinary(1, numericPos, 2, 9999, 9999, 9900), 10, 2, 9999999999, true},
		{"NaN", numericBinary(0, numericNaN, 0), 10, 2, 0, false},
		{"10^40", numericBinary(10, numericPos, 0, 1), 18, 0, 0, false},
		{"a digit over 9999", numericBinary(0, numericPos, 0, 10000), 18, 0, 0, false},
		// 1845 * 10^16 wraps around an int64 to 3255926290448384, below
		// 10^18: refused before it is multiplied.
		{"1845 * 10^16, past int64", numericBinary(4, numericPos, 0, 1845), 18, 0, 0, false},
		{"999999999999999999", numericBinary(4, numericPos, 0, 99, 9999, 9999, 9999, 9999), 18, 0, 999999999999999999, true},
		{"-0.0001 at scale 4", numericBinary(-1, numericNeg, 4, 1), 18, 4, -1, true},
		{"0.00001 at scale 4", numericBinary(-2, numericPos, 5, 1000), 18, 4, 0, false},
		{"short", []byte{0, 1}, 10, 2, 0, false},
	} {
		got, ok := scaledNumeric(c.b, c.p, c.s)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %d %v, want %d %v", c.name, got, ok, c.want, c.ok)
		}
	}
	// The text way gives the column's error for what the fast path refuses.
	parse := binaryNumeric(10, 2).(binWire)
	if _, err := parse(numericBinary(0, numericPos, 3, 1, 50)); err == nil {
		t.Error("1.005 went into Decimal(10, 2)")
	}
	if _, err := parse([]byte{0, 1}); err == nil {
		t.Error("a short numeric was read")
	}
}
