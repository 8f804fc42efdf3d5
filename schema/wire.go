package schema

import (
	"time"

	"github.com/shopspring/decimal"
)

// WireInts is a typed builder that keeps each value as the integer
// ClickHouse carries on the wire for its column, instead of a Go value
// with pointers in it (a decimal.Decimal's big.Int, a time.Time's
// location): a Decimal(P, S) of P <= 18 holds the value times 10^S, a
// DateTime64(6) the microseconds since 1970. Value and Typed still return
// the values Convert returns (a decimal with S fractional digits, a UTC
// time), made from the integers.
type WireInts interface {
	ColumnBuilder
	// WireInts returns the integers, 0 for NULL, and for a Nullable
	// column which of them are NULL (nil for other columns). Both are the
	// builder's, valid until its next change.
	WireInts() (vals []int64, nulls []bool)
}

var _ WireInts = (*wireBuilder[time.Time])(nil)

// maxScaled is the widest Decimal precision whose values fit an int64 once
// scaled: a Decimal(P, S) of P <= 18 is below 10^18 in units of 10^-S.
const maxScaled = 18

// wireBuilder holds a column's values as their wire integers; T is the Go
// type Convert returns for the column.
type wireBuilder[T any] struct {
	col   ColumnMap
	parse func(text []byte) (int64, error) // Convert's checks and errors
	bin   binWire                          // the same of binary values; nil for text only
	value func(v int64) T                  // Convert's value of an integer
	zero  T                                // Zero
	vals  []int64
	nulls nullMap
	zeros []bool // which values are Zero, once one is (nil before)
	typed []T    // Typed's values
	ptrs  []*T
}

// newScaledBuilder is the builder factory of Decimal(p, s), p <= 18.
func newScaledBuilder(p, s int) func(ColumnMap) ColumnBuilder {
	parse := scaledParser(p, s)
	value := func(v int64) decimal.Decimal { return decimal.New(v, -int32(s)) }
	return func(c ColumnMap) ColumnBuilder {
		b := &wireBuilder[decimal.Decimal]{col: c, parse: parse, value: value}
		b.bin, _ = c.bin.(binWire)
		return b
	}
}

// scaledParser parses numeric text into its value times 10^s after the
// checks of decimalParser(p, s).
func scaledParser(p, s int) func(text []byte) (int64, error) {
	check := decimalCheck(p, s)
	return func(text []byte) (int64, error) {
		if err := check(text); err != nil {
			return 0, err
		}
		return scaleDigits(text, s), nil
	}
}

// newMicrosBuilder is the builder of DateTime64(6, 'UTC').
func newMicrosBuilder(c ColumnMap) ColumnBuilder {
	b := &wireBuilder[time.Time]{col: c, parse: parseDateTime64Micros, zero: epoch(),
		value: func(us int64) time.Time { return time.UnixMicro(us).UTC() }}
	b.bin, _ = c.bin.(binWire)
	return b
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

func (b *wireBuilder[T]) Append(text []byte, null bool) error {
	return b.add(b.parse, text, null)
}

func (b *wireBuilder[T]) AppendBinary(data []byte, null bool) error {
	if b.bin == nil {
		return b.col.noBinary()
	}
	return b.add(b.bin, data, null)
}

// add appends one value read by parse.
func (b *wireBuilder[T]) add(parse func([]byte) (int64, error), data []byte, null bool) error {
	if null {
		if err := b.nulls.addNull(b.col); err != nil {
			return err
		}
		b.markZero(!b.col.Nullable) // a NullAsDefault column's zero, or NULL's place
		b.vals = append(room(b.vals, 1), 0)
		return nil
	}
	v, err := parse(data)
	if err != nil {
		return b.col.wrap(err)
	}
	b.nulls.add(b.col, false)
	b.markZero(false)
	b.vals = append(room(b.vals, 1), v)
	return nil
}

// AppendZero adds Zero: NULL for a Nullable column, else the zero of the
// Go type (a decimal.Decimal without digits or exponent, 1970-01-01
// 00:00:00 UTC), whose integer is 0.
func (b *wireBuilder[T]) AppendZero() {
	b.nulls.add(b.col, b.col.Nullable)
	b.markZero(!b.col.Nullable)
	b.vals = append(room(b.vals, 1), 0)
}

// markZero records whether the next value is Zero. A parsed zero decimal
// keeps the column's scale, as Convert's does ("0.00", which a Kafka
// event writes so); Zero has none.
func (b *wireBuilder[T]) markZero(zero bool) {
	if zero && b.zeros == nil {
		b.zeros = make([]bool, len(b.vals), cap(b.vals))
	}
	if b.zeros != nil {
		b.zeros = append(room(b.zeros, 1), zero)
	}
}

func (b *wireBuilder[T]) Len() int { return len(b.vals) }

func (b *wireBuilder[T]) Value(i int) any {
	if b.nulls.null(i) {
		return nil
	}
	return b.at(i)
}

// at is the i-th value as Convert makes it, Zero for a NULL.
func (b *wireBuilder[T]) at(i int) T {
	if b.zeros != nil && b.zeros[i] || b.nulls.null(i) {
		return b.zero
	}
	return b.value(b.vals[i])
}

// Typed returns the values as Convert makes them ([]*T for a Nullable
// column), made on each call: a sink that can take WireInts should.
func (b *wireBuilder[T]) Typed() (any, bool) {
	b.typed = b.typed[:0]
	for i := range b.vals {
		b.typed = append(room(b.typed, 1), b.at(i))
	}
	if !b.col.Nullable {
		return b.typed, true
	}
	b.ptrs = pointers(b.ptrs, b.typed, b.nulls)
	return b.ptrs, true
}

func (b *wireBuilder[T]) WireInts() ([]int64, []bool) {
	if !b.col.Nullable {
		return b.vals, nil
	}
	return b.vals, b.nulls
}

func (b *wireBuilder[T]) Truncate(n int) {
	b.vals = b.vals[:n]
	b.nulls.truncate(n)
	if b.zeros != nil {
		b.zeros = b.zeros[:n]
	}
	clear(b.typed)
	b.typed = b.typed[:0]
	clear(b.ptrs)
	b.ptrs = b.ptrs[:0]
}

func (b *wireBuilder[T]) Reset() { b.Truncate(0) }
