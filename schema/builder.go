package schema

import "unsafe"

// ColumnBuilder collects one column's values for a block of rows, converted
// from PostgreSQL's text form exactly as ColumnMap.Convert converts them,
// with the same errors. A typed builder keeps them in a slice of their Go
// type ([]int64, []string, []time.Time, ...), which a driver takes whole
// instead of value by value, with no boxing; the others keep []any.
type ColumnBuilder interface {
	// Append converts one value (null true for SQL NULL) and adds it.
	Append(text []byte, null bool) error
	// AppendZero adds the column's Zero value.
	AppendZero()
	// Len is the number of values added since the last Reset.
	Len() int
	// Value is the i-th value as Convert returns it.
	Value(i int) any
	// Typed returns the values as a slice of their Go type ([]*T, nil for
	// NULL, for a Nullable column) and true, or nil and false for a builder
	// that keeps []any. The slice is the builder's: it is valid until the
	// next Append, AppendZero, Truncate or Reset.
	Typed() (any, bool)
	// Truncate keeps the first n values.
	Truncate(n int)
	// Reset empties the builder, keeping its memory.
	Reset()
}

// NewBuilder returns a builder for the column's values. It is typed for a
// scalar column whose type is the one ferry maps its PostgreSQL type to,
// Nullable or not (not an enum's LowCardinality, say); a typed builder's
// values are of the Go type Convert returns.
func (c ColumnMap) NewBuilder() ColumnBuilder {
	if c.typed != nil {
		return c.typed(c)
	}
	return &anyBuilder{col: c}
}

// typedBuilder holds the values of one scalar type T.
type typedBuilder[T any] struct {
	col   ColumnMap
	parse parser[T]
	bin   binParser[T] // nil when the column is read as text only
	zero  T
	vals  []T
	nulls nullMap
	ptrs  []*T // Typed's values of a Nullable column
}

// newTyped makes the builder factory of a kind of parser p.
func newTyped[T any](p parser[T]) func(ColumnMap) ColumnBuilder {
	return func(c ColumnMap) ColumnBuilder {
		b := &typedBuilder[T]{col: c, parse: p}
		b.bin, _ = c.bin.(binParser[T])
		if z, ok := c.zero.(T); ok {
			b.zero = z
		}
		return b
	}
}

func (b *typedBuilder[T]) Append(text []byte, null bool) error {
	return b.add(b.parse, text, null)
}

func (b *typedBuilder[T]) AppendBinary(data []byte, null bool) error {
	if b.bin == nil {
		return b.col.noBinary()
	}
	return b.add(b.bin, data, null)
}

// add appends one value read by parse.
func (b *typedBuilder[T]) add(parse func([]byte) (T, error), data []byte, null bool) error {
	if null {
		if err := b.nulls.addNull(b.col); err != nil {
			return err
		}
		b.vals = append(room(b.vals, 1), b.zero) // a NullAsDefault column's zero, or NULL's place
		return nil
	}
	v, err := parse(data)
	if err != nil {
		return b.col.wrap(err)
	}
	b.nulls.add(b.col, false)
	b.vals = append(room(b.vals, 1), v)
	return nil
}

// room returns s with room for n more elements, doubling its capacity when
// it must grow: append grows a large slice by a quarter at a time, which
// copied a block's first megabytes of values over and over.
func room[T any](s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	grown := make([]T, len(s), max(2*cap(s), len(s)+n, 256))
	copy(grown, s)
	return grown
}

// AppendZero adds Zero: NULL for a Nullable column.
func (b *typedBuilder[T]) AppendZero() {
	b.nulls.add(b.col, b.col.Nullable)
	b.vals = append(room(b.vals, 1), b.zero)
}

func (b *typedBuilder[T]) Len() int { return len(b.vals) }

func (b *typedBuilder[T]) Value(i int) any {
	if b.nulls.null(i) {
		return nil
	}
	return b.vals[i]
}

func (b *typedBuilder[T]) Typed() (any, bool) {
	if !b.col.Nullable {
		return b.vals, true
	}
	b.ptrs = pointers(b.ptrs, b.vals, b.nulls)
	return b.ptrs, true
}

// pointers sets ptrs (reused) to point at vals, nil where nulls says NULL:
// a Nullable column's typed values.
func pointers[T any](ptrs []*T, vals []T, nulls nullMap) []*T {
	ptrs = ptrs[:0]
	for i := range vals {
		var p *T
		if !nulls.null(i) {
			p = &vals[i]
		}
		ptrs = append(room(ptrs, 1), p)
	}
	return ptrs
}

func (b *typedBuilder[T]) Truncate(n int) {
	clear(b.vals[n:])
	b.vals = b.vals[:n]
	b.nulls.truncate(n)
	clear(b.ptrs)
	b.ptrs = b.ptrs[:0]
}

func (b *typedBuilder[T]) Reset() { b.Truncate(0) }

// nullMap marks the NULLs of a Nullable column's values; it is empty for
// other columns.
type nullMap []bool

// add records whether the next value of column c is NULL.
func (m *nullMap) add(c ColumnMap, null bool) {
	if c.Nullable {
		*m = append(room(*m, 1), null)
	}
}

// addNull records a NULL of column c: a NULL in a Nullable column,
// nothing in a NullAsDefault one (whose builder adds the zero), and an
// error for any other.
func (m *nullMap) addNull(c ColumnMap) error {
	switch {
	case c.Nullable:
		m.add(c, true)
	case !c.nullZero:
		return c.nullError()
	}
	return nil
}

func (m nullMap) null(i int) bool { return i < len(m) && m[i] }

func (m *nullMap) truncate(n int) {
	if len(*m) > n {
		*m = (*m)[:n]
	}
}

// anyBuilder holds values as Convert returns them.
type anyBuilder struct {
	col     ColumnMap
	vals    []any
	scratch []byte // AppendBinary's text
}

func (b *anyBuilder) Append(text []byte, null bool) error {
	v, err := b.col.Convert(text, null)
	if err != nil {
		return err
	}
	b.vals = append(b.vals, v)
	return nil
}

// AppendBinary converts the text of a type whose binary form is text (an
// enum's label).
func (b *anyBuilder) AppendBinary(data []byte, null bool) error {
	bin, ok := b.col.bin.(binText)
	if !ok {
		return b.col.noBinary()
	}
	if null {
		return b.Append(nil, true)
	}
	text, err := bin(b.scratch[:0], data)
	if err != nil {
		return b.col.wrap(err)
	}
	b.scratch = text
	return b.Append(text, false)
}

func (b *anyBuilder) AppendZero()        { b.vals = append(b.vals, b.col.Zero()) }
func (b *anyBuilder) Len() int           { return len(b.vals) }
func (b *anyBuilder) Value(i int) any    { return b.vals[i] }
func (b *anyBuilder) Typed() (any, bool) { return nil, false }
func (b *anyBuilder) Truncate(n int)     { clear(b.vals[n:]); b.vals = b.vals[:n] }
func (b *anyBuilder) Reset()             { b.Truncate(0) }

// stringBuilder holds the values of a String column of PostgreSQL's text
// form in one buffer instead of a string each. Typed hands out strings
// that share the buffer's memory (unsafe.String) rather than copies: the
// buffer is not written while they are valid (until the next Append,
// AppendZero, Truncate or Reset), and the driver copies them into its
// column at once. Value returns a copy, which stays valid.
type stringBuilder struct {
	col   ColumnMap
	buf   []byte
	ends  []int // value i is buf[ends[i-1]:ends[i]]
	nulls nullMap
	views []string  // Typed's values, when made since the last change
	ptrs  []*string // and for a Nullable column, pointers to them
	fresh bool      // views (and ptrs) are up to date
	bin   binText   // nil when the column is read as text only
}

func newStringBuilder(c ColumnMap) ColumnBuilder {
	b := &stringBuilder{col: c}
	b.bin, _ = c.bin.(binText)
	return b
}

func (b *stringBuilder) Append(text []byte, null bool) error {
	if null && !b.col.Nullable && !b.col.nullZero {
		return b.col.nullError()
	}
	b.nulls.add(b.col, null)
	b.buf = append(room(b.buf, len(text)), text...) // a NULL is "" in the buffer
	b.ends = append(room(b.ends, 1), len(b.buf))
	b.fresh = false
	return nil
}

func (b *stringBuilder) AppendBinary(data []byte, null bool) error {
	if b.bin == nil {
		return b.col.noBinary()
	}
	if null {
		return b.Append(nil, true)
	}
	buf, err := b.bin(room(b.buf, len(data)), data)
	if err != nil {
		b.buf = b.buf[:b.start(len(b.ends))]
		return b.col.wrap(err)
	}
	b.nulls.add(b.col, false)
	b.buf = buf
	b.ends = append(room(b.ends, 1), len(b.buf))
	b.fresh = false
	return nil
}

// AppendZero adds Zero: NULL for a Nullable column.
func (b *stringBuilder) AppendZero() {
	b.nulls.add(b.col, b.col.Nullable)
	b.ends = append(room(b.ends, 1), len(b.buf))
	b.fresh = false
}

func (b *stringBuilder) Len() int { return len(b.ends) }

func (b *stringBuilder) start(i int) int {
	if i == 0 {
		return 0
	}
	return b.ends[i-1]
}

func (b *stringBuilder) Value(i int) any {
	if b.nulls.null(i) {
		return nil
	}
	return string(b.buf[b.start(i):b.ends[i]])
}

func (b *stringBuilder) Typed() (any, bool) {
	if !b.fresh {
		all := unsafe.String(unsafe.SliceData(b.buf), len(b.buf))
		b.views = b.views[:0]
		for i, end := range b.ends {
			b.views = append(room(b.views, 1), all[b.start(i):end])
		}
		b.ptrs = b.ptrs[:0]
		if b.col.Nullable {
			for i := range b.views {
				var p *string
				if !b.nulls.null(i) {
					p = &b.views[i]
				}
				b.ptrs = append(room(b.ptrs, 1), p)
			}
		}
		b.fresh = true
	}
	if b.col.Nullable {
		return b.ptrs, true
	}
	return b.views, true
}

func (b *stringBuilder) Truncate(n int) {
	b.buf = b.buf[:b.start(n)]
	b.ends = b.ends[:n]
	b.nulls.truncate(n)
	clear(b.views)
	b.views = b.views[:0]
	clear(b.ptrs)
	b.ptrs = b.ptrs[:0]
	b.fresh = false
}

func (b *stringBuilder) Reset() { b.Truncate(0) }
