package clickhouse

import (
	"bytes"
	"encoding/binary"
	"sync"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/shopspring/decimal"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// Integers on the wire
//
// The driver appends every decimal.Decimal to a Decimal column through
// three big.Int copies (rescale, convert, range check), six or seven
// allocations a value, and every time.Time to a DateTime64 column through
// its nanoseconds. A Decimal(P, S) of P <= 18 is a 4- or 8-byte integer on
// the wire, the value times 10^S, and a DateTime64(6) an 8-byte count of
// microseconds: ferry computes those integers itself (the copy's builders
// keep them, schema.WireInts) and hands the still empty column their
// native form (Nullable: the null map, then the values), which the
// column's Decode reads. A value the shortcut does not cover (a decimal
// with more fractional digits than S or a coefficient past 18 digits, a
// result past the width, a time with nanoseconds) sends the whole column
// the driver's way, which stores it or fails on it as before.

// wireKind is what a column's integers are.
type wireKind uint8

const (
	wireDecimal wireKind = iota + 1 // a Decimal(P <= 18, S): the value times 10^S
	wireMicros                      // a DateTime64(6): microseconds since 1970
)

// wireForm describes a column whose values travel as integers.
type wireForm struct {
	kind     wireKind
	width    int   // bytes per value: 4 (Decimal, P <= 9) or 8
	scale    int32 // a Decimal's S
	nullable bool
}

// wireColumn returns the wire form of server's column when it is a
// Decimal(P, S) with P <= 18 or a DateTime64(6), or Nullable of one.
func wireColumn(server column.Interface) (wireForm, bool) {
	var w wireForm
	if n, ok := server.(*column.Nullable); ok {
		server, w.nullable = n.Base(), true
	}
	switch c := server.(type) {
	case *column.Decimal:
		if c.Precision() > 18 || c.Scale() > 18 {
			return wireForm{}, false
		}
		w.kind, w.width, w.scale = wireDecimal, 8, int32(c.Scale())
		if c.Precision() <= 9 {
			w.width = 4
		}
	case *column.DateTime64:
		if c.Type() != rawTimeType {
			return wireForm{}, false
		}
		w.kind, w.width = wireMicros, 8
	default:
		return wireForm{}, false
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

const (
	maxInt64 = 1<<63 - 1
	maxInt32 = 1<<31 - 1
	minInt32 = -1 << 31
)

// scaled is d times 10^S, and false when that needs the driver: a
// coefficient of more than 18 digits, digits past S, or a result past an
// int64.
func (w wireForm) scaled(d decimal.Decimal) (int64, bool) {
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

// micros is t in microseconds since 1970, and false for a time the
// driver should judge: the zero time.Time (which it stores as 1970) or one
// with a fraction of a microsecond.
func micros(t time.Time) (int64, bool) {
	if t.IsZero() || t.Nanosecond()%1000 != 0 {
		return 0, false
	}
	return t.UnixMicro(), true
}

// wireAt tells the i-th value's integer, or null for NULL; ok false for a
// value the shortcut does not cover.
type wireAt func(i int) (v int64, null, ok bool)

// rowValues reads column j of rows, as Convert made them.
func (w wireForm) rowValues(rows []loader.Row, j int) wireAt {
	return func(i int) (int64, bool, bool) {
		switch v := rows[i].Values[j].(type) {
		case nil:
			return 0, true, true
		case decimal.Decimal:
			if w.kind == wireDecimal {
				s, ok := w.scaled(v)
				return s, false, ok
			}
		case time.Time:
			if w.kind == wireMicros {
				us, ok := micros(v)
				return us, false, ok
			}
		}
		return 0, false, false
	}
}

// builderValues reads a copy's column from a builder that keeps the
// integers; nil for another builder.
func builderValues(b schema.ColumnBuilder) wireAt {
	wb, ok := b.(schema.WireInts)
	if !ok {
		return nil
	}
	vals, nulls := wb.WireInts()
	return func(i int) (int64, bool, bool) {
		return vals[i], nulls != nil && nulls[i], true
	}
}

// encode writes the native form of n values to buf (reset first): the null
// map of a Nullable column, then each value's integer, 0 for NULL. It
// returns false when a value needs the driver's path.
func (w wireForm) encode(buf []byte, n int, value wireAt) ([]byte, bool) {
	if size := n * (w.width + int(boolUint8(w.nullable))); cap(buf) < size {
		buf = make([]byte, 0, size)
	}
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

// appendWire appends n values to server's column in their native form
// when the column is one whose values travel as integers, holds no rows
// yet, and values (given the column's form; nil for none) tells every
// value's integer; false leaves the column as it was, for the driver's
// path. (A column's Decode reads into the whole column, the rows it held
// included, so it only appends to an empty one.)
func appendWire(server column.Interface, n int, values func(wireForm) wireAt, buf *[]byte) (bool, error) {
	w, ok := wireColumn(server)
	if !ok || n == 0 || server.Rows() != 0 {
		return false, nil
	}
	value := values(w)
	if value == nil {
		return false, nil
	}
	var fits bool
	if *buf, fits = w.encode(*buf, n, value); !fits {
		return false, nil
	}
	d := wireDecoders.Get().(*wireDecoder)
	d.src.Reset(*buf)
	if err := server.Decode(d.r, n); err != nil {
		return true, err // d may hold unread bytes: not put back
	}
	wireDecoders.Put(d)
	return true, nil
}

// wireDecoder is a proto.Reader over a buffer appendWire sets: a reader
// allocates 128 KiB, too much for every column of every batch. Decode
// reads all of the buffer, so a decoder is empty when it goes back to the
// pool.
type wireDecoder struct {
	src *bytes.Reader
	r   *proto.Reader
}

var wireDecoders = sync.Pool{New: func() any {
	src := bytes.NewReader(nil)
	return &wireDecoder{src: src, r: proto.NewReader(src)}
}}
