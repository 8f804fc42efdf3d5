package schema

import (
	"errors"
	"strings"
	"testing"
)

// unquoteCH reverses QuoteCH/QuoteCHString the way ClickHouse reads a
// quoted name or string: q...q with backslash escapes.
func unquoteCH(s string, q byte) (string, error) {
	if len(s) < 2 || s[0] != q || s[len(s)-1] != q {
		return "", errors.New("not quoted")
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == q {
			return "", errors.New("unescaped quote inside")
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i++; i == len(s) {
			return "", errors.New("dangling backslash")
		}
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case 'x':
			if i+2 >= len(s) {
				return "", errors.New("short \\x")
			}
			hi, lo := strings.IndexByte(hexDigits, s[i+1]), strings.IndexByte(hexDigits, s[i+2])
			if hi < 0 || lo < 0 {
				return "", errors.New("bad \\x")
			}
			b.WriteByte(byte(hi<<4 | lo))
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// unquotePG reverses QuotePG.
func unquotePG(s string) (string, error) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", errors.New("not quoted")
	}
	inner := s[1 : len(s)-1]
	if strings.Count(strings.ReplaceAll(inner, `""`, ""), `"`) != 0 {
		return "", errors.New("lone quote inside")
	}
	return strings.ReplaceAll(inner, `""`, `"`), nil
}

func TestQuote(t *testing.T) {
	tests := []struct {
		in, pg, ch, chs string
	}{
		{"id", `"id"`, "`id`", `'id'`},
		{"", `""`, "``", `''`},
		{`a"b`, `"a""b"`, "`a\"b`", `'a"b'`},
		{"a`b", "\"a`b\"", "`a\\`b`", "'a`b'"},
		{"it's", `"it's"`, "`it's`", `'it\'s'`},
		{`back\slash`, `"back\slash"`, "`back\\\\slash`", `'back\\slash'`},
		{"new\nline\ttab\rcr\x00nul", "\"new\nline\ttab\rcr\x00nul\"", "`new\\nline\\ttab\\rcr\\0nul`", `'new\nline\ttab\rcr\0nul'`},
		{"ünïcödé 表", `"ünïcödé 表"`, "`ünïcödé 表`", `'ünïcödé 表'`},
		{"bell\x07del\x7f", "\"bell\x07del\x7f\"", "`bell\\x07del\\x7f`", `'bell\x07del\x7f'`},
		{"bad\xffutf8", "\"bad\xffutf8\"", "`bad\\xffutf8`", `'bad\xffutf8'`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := QuotePG(tt.in); got != tt.pg {
				t.Errorf("QuotePG = %q, want %q", got, tt.pg)
			}
			if got := QuoteCH(tt.in); got != tt.ch {
				t.Errorf("QuoteCH = %q, want %q", got, tt.ch)
			}
			if got := QuoteCHString(tt.in); got != tt.chs {
				t.Errorf("QuoteCHString = %q, want %q", got, tt.chs)
			}
		})
	}
}

func TestCHTableName(t *testing.T) {
	tests := []struct{ schema, table, want string }{
		{"public", "orders", "orders"},
		{"sales", "orders", "sales__orders"},
		{"Public", "x", "Public__x"},
	}
	for _, tt := range tests {
		t.Run(tt.schema+"."+tt.table, func(t *testing.T) {
			if got := CHTableName(tt.schema, tt.table); got != tt.want {
				t.Errorf("CHTableName = %q, want %q", got, tt.want)
			}
		})
	}
}

// quoteSeeds are the fuzz corpora's seeds.
func quoteSeeds() []string {
	return []string{"", "id", "a`b", `a"b`, "it's", `\`, "\n\t\r\x00", "ü表", "\xff\xfe", "\\x41", "``''\"\""}
}

func FuzzQuoteCH(f *testing.F) {
	for _, s := range quoteSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkCHRoundTrip(t, QuoteCH(s), s, '`')
	})
}

func FuzzQuoteCHString(f *testing.F) {
	for _, s := range quoteSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkCHRoundTrip(t, QuoteCHString(s), s, '\'')
	})
}

func FuzzQuotePG(f *testing.F) {
	for _, s := range quoteSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := unquotePG(QuotePG(s))
		if err != nil || got != s {
			t.Fatalf("unquotePG(QuotePG(%q)) = %q, %v", s, got, err)
		}
	})
}

// checkCHRoundTrip checks quoted reads back as s and holds no raw control
// byte or unescaped quote.
func checkCHRoundTrip(t *testing.T, quoted, s string, q byte) {
	t.Helper()
	got, err := unquoteCH(quoted, q)
	if err != nil || got != s {
		t.Fatalf("unquote(%q) = %q, %v; want %q", quoted, got, err, s)
	}
	for i := 0; i < len(quoted); i++ {
		if quoted[i] < 0x20 || quoted[i] == 0x7f {
			t.Fatalf("%q holds raw control byte %#x", quoted, quoted[i])
		}
	}
}
