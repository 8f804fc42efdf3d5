package schema

import (
	"bytes"
	"errors"
	"fmt"
)

// errArrayShape is wrapped by errors for arrays ClickHouse's Array can't
// hold as PostgreSQL has them (more than one dimension, custom bounds).
var errArrayShape = fmt.Errorf("only one-dimensional arrays with default bounds fit Array: %w", ErrUnrepresentable)

// arrayElem is one element of an array's text form: its unescaped text, or
// NULL.
type arrayElem struct {
	text []byte
	null bool
}

// arrayConv makes a converter of a one-dimensional array whose elements p
// parses. The result is a []*T with nil for NULL elements.
func arrayConv[T any](p parser[T]) converter {
	return func(text []byte) (any, error) {
		elems, err := splitArray(text)
		if err != nil {
			return nil, err
		}
		out := make([]*T, len(elems))
		vals := make([]T, len(elems))
		for i, e := range elems {
			if e.null {
				continue
			}
			if vals[i], err = p(e.text); err != nil {
				return nil, fmt.Errorf("array element %d: %w", i+1, err)
			}
			out[i] = &vals[i]
		}
		return out, nil
	}
}

// splitArray splits PostgreSQL's text form of a one-dimensional array
// ("{1,NULL,"a b"}") into its elements. An unquoted NULL is SQL NULL, a
// quoted one the string NULL; backslash escapes the next byte; whitespace
// around elements is not part of them unless quoted or escaped.
func splitArray(text []byte) ([]arrayElem, error) {
	s := trimArraySpace(text)
	if len(s) > 0 && s[0] == '[' {
		return nil, fmt.Errorf("array %s: %w", quoteValue(text), errArrayShape)
	}
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, invalid("array", text)
	}
	body := s[1 : len(s)-1]
	if len(trimArraySpace(body)) == 0 {
		return []arrayElem{}, nil
	}
	elems := make([]arrayElem, 0, bytes.Count(body, []byte{','})+1)
	for i := 0; ; i++ {
		i = skipSpace(body, i)
		e, next, err := readElem(body, i)
		if err != nil {
			if errors.Is(err, errArrayShape) {
				return nil, fmt.Errorf("array %s: %w", quoteValue(text), err)
			}
			return nil, invalid("array", text)
		}
		elems = append(elems, e)
		i = skipSpace(body, next)
		if i == len(body) {
			return elems, nil
		}
		if body[i] != ',' {
			return nil, invalid("array", text)
		}
	}
}

// readElem reads the element that starts at body[i].
func readElem(body []byte, i int) (arrayElem, int, error) {
	if i == len(body) {
		return arrayElem{}, i, errors.New("missing element")
	}
	switch body[i] {
	case '{':
		return arrayElem{}, i, errArrayShape
	case '"':
		return readQuoted(body, i+1)
	}
	return readUnquoted(body, i)
}

// readQuoted reads a quoted element whose text starts at body[i].
func readQuoted(body []byte, i int) (arrayElem, int, error) {
	start, escaped := i, false
	for ; i < len(body); i++ {
		switch body[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return arrayElem{text: unescape(body[start:i], escaped)}, i + 1, nil
		}
	}
	return arrayElem{}, i, errors.New("unterminated quoted element")
}

// readUnquoted reads an unquoted element starting at body[i], up to the next
// unescaped comma, without its trailing unescaped whitespace.
func readUnquoted(body []byte, i int) (arrayElem, int, error) {
	start, end, escaped := i, i, false
	for ; i < len(body); i++ {
		switch c := body[i]; c {
		case '\\':
			if i+1 == len(body) {
				return arrayElem{}, i, errors.New("dangling backslash")
			}
			escaped = true
			i++
			end = i + 1
		case ',':
			e, err := unquotedElem(body[start:end], escaped)
			return e, i, err
		case '{', '}', '"':
			return arrayElem{}, i, errors.New("unexpected " + string(c))
		default:
			if !isArraySpace(c) {
				end = i + 1
			}
		}
	}
	e, err := unquotedElem(body[start:end], escaped)
	return e, i, err
}

// unquotedElem is an unquoted element's value: NULL when it is the bare
// word NULL in any case.
func unquotedElem(raw []byte, escaped bool) (arrayElem, error) {
	if !escaped && bytes.EqualFold(raw, []byte("NULL")) {
		return arrayElem{null: true}, nil
	}
	if len(raw) == 0 {
		return arrayElem{}, errors.New("empty unquoted element")
	}
	return arrayElem{text: unescape(raw, escaped)}, nil
}

// unescape drops the backslashes of raw; raw is returned as is when it has
// none.
func unescape(raw []byte, escaped bool) []byte {
	if !escaped {
		return raw
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' && i+1 < len(raw) {
			i++
		}
		out = append(out, raw[i])
	}
	return out
}

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isArraySpace(b[i]) {
		i++
	}
	return i
}

// trimArraySpace trims the whitespace array_in skips, which is ASCII
// only: bytes.TrimSpace would also take U+00A0, U+0085 and U+3000, which
// array_out leaves unquoted, so {"\u00a0"} would become {}.
func trimArraySpace(b []byte) []byte {
	for len(b) > 0 && isArraySpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isArraySpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// isArraySpace is the whitespace PostgreSQL's array input skips.
func isArraySpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// ArrayElements splits PostgreSQL's text of a one-dimensional array with
// default bounds into its elements' unescaped texts; nulls marks the NULL
// elements. Other shapes (more dimensions, custom bounds) fail with an
// error wrapping ErrUnrepresentable.
func ArrayElements(text []byte) (elems [][]byte, nulls []bool, err error) {
	es, err := splitArray(text)
	if err != nil {
		return nil, nil, err
	}
	elems, nulls = make([][]byte, len(es)), make([]bool, len(es))
	for i, e := range es {
		elems[i], nulls[i] = e.text, e.null
	}
	return elems, nulls, nil
}

// TextArrayElement describes the elements of an array column that Map
// holds as String with PostgreSQL's array text (a nullable or key array)
// when ferry can split its values: the elements' ClickHouse type under caps
// and the converter of one element's text. ok is false for other columns,
// for arrays declared with more than one dimension, and for arrays of
// element types whose delimiter is not a comma or that ferry does not map.
func TextArrayElement(col Column, caps Capabilities) (chType string, conv func(text []byte) (any, error), ok bool) {
	if col.ElemOID == 0 || col.Text || col.Dims > 1 {
		return "", nil, false
	}
	elem, ok := scalarKind(col.ElemOID, col.TypeBaseName, col.TypeMod, caps)
	if col.Enum {
		elem, ok = stringKind(), true
	}
	if !ok || elem.wholeArray {
		return "", nil, false
	}
	if k, _ := arrayKind(col, caps, col.NotNull || col.Key); k.chType != "String" {
		return "", nil, false
	}
	return elem.chType, elem.scalar, true
}
