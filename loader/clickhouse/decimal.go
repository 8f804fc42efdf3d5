package clickhouse

import (
	"bytes"
	"encoding/binary"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/shopspring/decimal"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// The driver appends every decimal.Decimal to a Decimal column through
// three big.Int copies (rescale, convert, range check): six or seven
// allocations a value, a quarter of the initial copy's CPU. A Decimal(P, S)
// of P <= 18 is a 4- or 8-byte integer on the wire, the value times 10^S,
// so ferry computes that integer itself when the value's coefficient fits
// an int64 and hands the still empty column its native form (Nullable: the
// null map, then the values), which the column's Decode reads. A value the shortcut does not cover (a wider coefficient, more
// fractional digits than S, an integer that overflows the width) sends
// the whole column back to the driver's own path, which stores it or fails
// on it as before.

// decimalWire describes a Decimal column of at most 18 digits.
type decimalWire struct {
	width    int   // bytes per value: 4 (P <= 9) or 8
	scale    int32 // S
	nullable bool
}

// wireDecimal returns the wire form of server's column when it is a
// Decimal(P, S), or Nullable of one, with P <= 18.
func wireDecimal(server column.Interface) (decimalWire, bool) {
	nullable := false
	if n, ok := server.(*column.Nullable); ok {
		server, nullable = n.Base(), true
	}
	d, ok := server.(*column.Decimal)
	if !ok || d.Precision() > 18 || d.Scale() > 18 {
		return decimalWire{}, false
	}
	w := decimalWire{width: 8, scale: int32(d.Scale()), nullable: nullable}
	if d.Precision() <= 9 {
		w.width = 4
	}
	return w, true
}

var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// scaled is d times 10^S, and false when that needs the driver: a
// coefficient of more than 18 digits, digits past S, or a result past an
// int64.
func (w decimalWire) scaled(d decimal.Decimal) (int64, bool) {
	if d.NumDigits() > 18 {
		return 0, false
	}
	shift := d.Exponent() + w.scale
	if shift < 0 || shift > 18 {
		return 0, false
	}
	coef, mul := d.CoefficientInt64(), pow10[shift]
	if coef > maxInt64/mul || coef < -maxInt64/mul {
		return 0, false
	}
	return coef * mul, true
}

const (
	maxInt64 = 1<<63 - 1
	maxInt32 = 1<<31 - 1
	minInt32 = -1 << 31
)

// scaledAt tells the i-th value of a column times 10^S, or null for NULL;
// ok false for a value the shortcut does not cover.
type scaledAt func(i int) (v int64, null, ok bool)

// rowValues reads column j of rows.
func (w decimalWire) rowValues(rows []loader.Row, j int) scaledAt {
	return func(i int) (int64, bool, bool) {
		switch d := rows[i].Values[j].(type) {
		case decimal.Decimal:
			v, ok := w.scaled(d)
			return v, false, ok
		case nil:
			return 0, true, true
		}
		return 0, false, false
	}
}

// builderValues reads a copy's column: the integers of a builder that
// keeps them, or a typed builder's decimals.
func (w decimalWire) builderValues(b schema.ColumnBuilder) scaledAt {
	if sb, ok := b.(schema.ScaledDecimals); ok && int32(sb.Scale()) == w.scale {
		vals, nulls := sb.Scaled()
		return func(i int) (int64, bool, bool) {
			return vals[i], nulls != nil && nulls[i], true
		}
	}
	vals, _ := b.Typed()
	switch v := vals.(type) {
	case []decimal.Decimal:
		return func(i int) (int64, bool, bool) {
			s, ok := w.scaled(v[i])
			return s, false, ok
		}
	case []*decimal.Decimal:
		return func(i int) (int64, bool, bool) {
			if v[i] == nil {
				return 0, true, true
			}
			s, ok := w.scaled(*v[i])
			return s, false, ok
		}
	}
	return func(int) (int64, bool, bool) { return 0, false, false }
}

// encode writes the native form of n values to buf (reset first): the null
// map of a Nullable column, then each value's integer, 0 for NULL. It
// returns false when a value needs the driver's path.
func (w decimalWire) encode(buf []byte, n int, value scaledAt) ([]byte, bool) {
	buf = buf[:0]
	if w.nullable {
		for i := range n {
			_, null, _ := value(i)
			buf = append(buf, boolUint8(null))
		}
	}
	for i := range n {
		v, null, ok := value(i)
		switch {
		case !ok || null && !w.nullable:
			return buf, false
		case w.width == 4:
			if v > maxInt32 || v < minInt32 {
				return buf, false
			}
			buf = binary.LittleEndian.AppendUint32(buf, uint32(int32(v)))
		default:
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
		}
	}
	return buf, true
}

// appendDecimals appends n values to server's column in their native form
// when server is a Decimal the shortcut covers, holds no rows yet, and
// every value is one it can scale; false leaves the column as it was, for
// the driver's path. (A column's Decode reads into the whole column, the
// rows it held included, so it only appends to an empty one.)
func appendDecimals(server column.Interface, n int, values func(decimalWire) scaledAt, buf *[]byte) (bool, error) {
	w, ok := wireDecimal(server)
	if !ok || n == 0 || server.Rows() != 0 {
		return false, nil
	}
	var fits bool
	if *buf, fits = w.encode(*buf, n, values(w)); !fits {
		return false, nil
	}
	return true, server.Decode(proto.NewReader(bytes.NewReader(*buf)), n)
}
