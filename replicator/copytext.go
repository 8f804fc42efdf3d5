package replicator

import (
	"bytes"
	"fmt"
)

// copyReader splits COPY TO STDOUT text-format output into rows and fields.
// It is an io.Writer: pgconn's CopyTo writes the stream into it, and it
// calls row with each complete row's fields, nil for \N. The field slices
// are only valid during the call.
type copyReader struct {
	row     func(fields [][]byte) error
	partial []byte   // an incomplete line left from the last Write
	fields  [][]byte // reused between rows
	scratch []byte   // unescaped field bytes, reused between rows
}

func (c *copyReader) Write(p []byte) (int, error) {
	n := len(p)
	if len(c.partial) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.partial = append(c.partial, p...)
			return n, nil
		}
		c.partial = append(c.partial, p[:i]...)
		if err := c.line(c.partial); err != nil {
			return 0, err
		}
		c.partial = c.partial[:0]
		p = p[i+1:]
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.partial = append(c.partial, p...)
			break
		}
		if err := c.line(p[:i]); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	return n, nil
}

// Close reports a row left without its newline.
func (c *copyReader) Close() error {
	if len(c.partial) > 0 {
		return fmt.Errorf("copy: stream ended inside a row")
	}
	return nil
}

func (c *copyReader) line(l []byte) error {
	c.fields = c.fields[:0]
	c.scratch = c.scratch[:0]
	// A field without escapes is a slice of l; an escaped one is unescaped
	// into scratch, whose offsets are recorded first and sliced afterwards,
	// because appending to scratch may move it.
	type span struct{ field, start, end int }
	var spans [16]span
	sp := spans[:0]
	for {
		i := bytes.IndexByte(l, '\t')
		f := l
		if i >= 0 {
			f = l[:i:i]
		}
		switch {
		case len(f) == 2 && f[0] == '\\' && f[1] == 'N':
			c.fields = append(c.fields, nil)
		case bytes.IndexByte(f, '\\') < 0:
			c.fields = append(c.fields, f) // not nil, even when empty: l is not
		default:
			start := len(c.scratch)
			var err error
			c.scratch, err = unescapeCopy(c.scratch, f)
			if err != nil {
				return err
			}
			sp = append(sp, span{len(c.fields), start, len(c.scratch)})
			c.fields = append(c.fields, nil)
		}
		if i < 0 {
			break
		}
		l = l[i+1:]
	}
	for _, s := range sp {
		c.fields[s.field] = c.scratch[s.start:s.end:s.end]
	}
	return c.row(c.fields)
}

// unescapeCopy appends the COPY text-format field f, unescaped, to dst.
// A non-NULL empty field is returned as an empty, non-nil slice.
func unescapeCopy(dst, f []byte) ([]byte, error) {
	if dst == nil {
		dst = make([]byte, 0, len(f))
	}
	for {
		i := bytes.IndexByte(f, '\\')
		if i < 0 {
			return append(dst, f...), nil
		}
		dst = append(dst, f[:i]...)
		if i+1 >= len(f) {
			return dst, fmt.Errorf("copy: field ends with a lone backslash")
		}
		c := f[i+1]
		f = f[i+2:]
		switch c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'v':
			dst = append(dst, '\v')
		case 'x':
			v, n := parseDigits(f, 16, 2)
			if n == 0 {
				dst = append(dst, 'x')
			} else {
				dst = append(dst, byte(v))
				f = f[n:]
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, n := parseDigits(f, 8, 2)
			dst = append(dst, byte((int(c-'0')<<(3*n))|v))
			f = f[n:]
		default:
			dst = append(dst, c)
		}
	}
}

// parseDigits reads up to max digits of base from the start of f.
func parseDigits(f []byte, base, max int) (int, int) {
	v, n := 0, 0
	for n < max && n < len(f) {
		d := digitValue(f[n])
		if d < 0 || d >= base {
			break
		}
		v = v*base + d
		n++
	}
	return v, n
}

func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
