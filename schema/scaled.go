package schema

import "github.com/shopspring/decimal"

// maxScaled is the widest Decimal precision whose values fit an int64 once
// scaled: a Decimal(P, S) of P <= 18 is below 10^18 in units of 10^-S.
const maxScaled = 18

// ScaledDecimals is the builder of a Decimal(P, S) column of P <= 18. It
// keeps each value as an integer, the value times 10^S, which is how
// ClickHouse's Decimal32 and Decimal64 travel on the wire, instead of a
// decimal.Decimal and the big.Int behind it. Value and Typed still return
// decimal.Decimal values, equal to Convert's (with S fractional digits).
type ScaledDecimals interface {
	ColumnBuilder
	// Scaled returns the values times 10^S (0 for NULL) and, for a
	// Nullable column, which of them are NULL (nil otherwise). Both are the
	// builder's, valid until its next change.
	Scaled() (vals []int64, nulls []bool)
	// Scale is S.
	Scale() int
}

var _ ScaledDecimals = (*scaledBuilder)(nil)

// scaledBuilder holds a Decimal(P, S) column's values times 10^S.
type scaledBuilder struct {
	col   ColumnMap
	check func(text []byte) error // decimalParser's
	scale int
	vals  []int64
	nulls nullMap
	decs  []decimal.Decimal // Typed's values
	ptrs  []*decimal.Decimal
}

// newScaledBuilder is the builder factory of Decimal(p, s), p <= 18.
func newScaledBuilder(p, s int) func(ColumnMap) ColumnBuilder {
	check := decimalCheck(p, s)
	return func(c ColumnMap) ColumnBuilder {
		return &scaledBuilder{col: c, check: check, scale: s}
	}
}

func (b *scaledBuilder) Append(text []byte, null bool) error {
	if null {
		switch {
		case b.col.Nullable:
			b.nulls.add(b.col, true)
		case !b.col.nullZero:
			return b.col.nullError()
		}
		b.vals = append(room(b.vals, 1), 0)
		return nil
	}
	if err := b.check(text); err != nil {
		return b.col.wrap(err)
	}
	b.nulls.add(b.col, false)
	b.vals = append(room(b.vals, 1), scaleDigits(text, b.scale))
	return nil
}

// scaleDigits is checked numeric text ([-+]digits[.digits], at most p-s
// integer digits and no non-zero digit past the s-th fractional one) times
// 10^s.
func scaleDigits(text []byte, s int) int64 {
	var v int64
	frac := -1 // fractional digits taken, once past the point
	for _, c := range text {
		switch {
		case c == '.':
			frac = 0
		case c >= '0' && c <= '9' && frac < s:
			v = v*10 + int64(c-'0')
			if frac >= 0 {
				frac++
			}
		}
	}
	for frac = max(frac, 0); frac < s; frac++ {
		v *= 10
	}
	if text[0] == '-' {
		v = -v
	}
	return v
}

// AppendZero adds Zero: NULL for a Nullable column, else 0.
func (b *scaledBuilder) AppendZero() {
	b.nulls.add(b.col, b.col.Nullable)
	b.vals = append(room(b.vals, 1), 0)
}

func (b *scaledBuilder) Len() int { return len(b.vals) }

func (b *scaledBuilder) Value(i int) any {
	switch {
	case b.nulls.null(i):
		return nil
	case b.vals[i] == 0:
		return decimal.Decimal{} // as Zero, which the tests compare deeply
	}
	return decimal.New(b.vals[i], -int32(b.scale))
}

// Typed returns the values as decimal.Decimal ([]*decimal.Decimal for a
// Nullable column), made on each call: a sink that can take Scaled
// should.
func (b *scaledBuilder) Typed() (any, bool) {
	b.decs = b.decs[:0]
	for i := range b.vals {
		d, _ := b.Value(i).(decimal.Decimal)
		b.decs = append(room(b.decs, 1), d)
	}
	if !b.col.Nullable {
		return b.decs, true
	}
	b.ptrs = b.ptrs[:0]
	for i := range b.decs {
		var p *decimal.Decimal
		if !b.nulls.null(i) {
			p = &b.decs[i]
		}
		b.ptrs = append(room(b.ptrs, 1), p)
	}
	return b.ptrs, true
}

func (b *scaledBuilder) Scaled() ([]int64, []bool) {
	if !b.col.Nullable {
		return b.vals, nil
	}
	return b.vals, b.nulls
}

func (b *scaledBuilder) Scale() int { return b.scale }

func (b *scaledBuilder) Truncate(n int) {
	b.vals = b.vals[:n]
	b.nulls.truncate(n)
	clear(b.decs)
	b.decs = b.decs[:0]
	clear(b.ptrs)
	b.ptrs = b.ptrs[:0]
}

func (b *scaledBuilder) Reset() { b.Truncate(0) }
