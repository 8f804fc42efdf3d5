package schema

import (
	"strings"
	"unicode/utf8"
)

// QuotePG quotes s as a PostgreSQL identifier: the result is s between
// double quotes, with every double quote doubled. Whatever s holds, the
// result is read back by PostgreSQL as exactly one identifier (PostgreSQL
// itself rejects a NUL byte in any query text).
func QuotePG(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteCH quotes s as a ClickHouse identifier between backticks. Backslash,
// backtick, control bytes and bytes that are not valid UTF-8 are written as
// backslash escapes, which ClickHouse decodes inside backticks, so the
// result always reads back as exactly s.
func QuoteCH(s string) string {
	return quoteCH(s, '`')
}

// QuoteCHString quotes s as a ClickHouse string literal between single
// quotes, escaping like QuoteCH. ClickHouse strings are bytes: any byte
// sequence survives the round trip.
func QuoteCHString(s string) string {
	return quoteCH(s, '\'')
}

// CHTableName is the ClickHouse name of a PostgreSQL table: the bare table
// name for schema public, "<schema>__<table>" for any other schema.
func CHTableName(schema, table string) string {
	if schema == "public" {
		return table
	}
	return schema + "__" + table
}

const hexDigits = "0123456789abcdef"

// quoteCH writes s between two q bytes with ClickHouse backslash escapes.
func quoteCH(s string, q byte) string {
	if isPlain(s, q) {
		return string(q) + s + string(q)
	}
	b := make([]byte, 0, len(s)+8)
	b = append(b, q)
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		b = appendEscapedASCII(b, c, q)
		i++
	}
	return string(append(b, q))
}

// appendEscapedASCII appends one byte below 0x80, escaped when needed.
func appendEscapedASCII(b []byte, c, q byte) []byte {
	switch {
	case c == '\\' || c == q:
		return append(b, '\\', c)
	case c == '\n':
		return append(b, '\\', 'n')
	case c == '\t':
		return append(b, '\\', 't')
	case c == '\r':
		return append(b, '\\', 'r')
	case c == 0:
		return append(b, '\\', '0')
	case c < 0x20 || c == 0x7f:
		return append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
	}
	return append(b, c)
}

// isPlain reports whether s needs no escape at all between q quotes.
func isPlain(s string, q byte) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' || c == q {
			return false
		}
	}
	return true
}
