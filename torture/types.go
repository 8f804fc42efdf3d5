package torture

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// colType is one PostgreSQL column type the generator uses: its SQL, a
// value generator that returns PostgreSQL's input text (nil for NULL), and
// the canonical rendering the fingerprint compares.
type colType struct {
	name string // short name, for logs
	sql  string
	// gen returns a value in PostgreSQL's text input form; big asks for a
	// TOAST-sized one where the type has such values.
	gen func(r *rand.Rand, big bool) string
	// toast marks the types whose big values go out of line (STORAGE EXTERNAL).
	toast bool
	// keyable types may be part of a primary key.
	keyable bool
	// render names how the PostgreSQL side renders the value (see pgRender).
	render string
	// modernOnly: a value of this type in the generator's range is held
	// exactly only by ClickHouse ≥ 22.8's types; elsewhere its text is sent.
	textOnLegacy bool
	// textOnModern: values (infinity) that Date32/DateTime64 cannot hold;
	// such columns are given --text-columns on a modern server.
	textOnModern bool
}

var types = []colType{
	{name: "int2", sql: "smallint", gen: genInt(-32768, 32767), keyable: true, render: "plain"},
	{name: "int4", sql: "integer", gen: genInt(-2147483648, 2147483647), keyable: true, render: "plain"},
	{name: "int8", sql: "bigint", gen: genInt(-9223372036854775808, 9223372036854775807), keyable: true, render: "plain"},
	{name: "float4", sql: "real", gen: genFloat, render: "float"},
	{name: "float8", sql: "double precision", gen: genFloat, render: "float"},
	{name: "dec38", sql: "numeric(38,6)", gen: genDecimal(32, 6), render: "decimal"},
	{name: "dec10", sql: "numeric(10,2)", gen: genDecimal(8, 2), keyable: true, render: "decimal"},
	{name: "numeric", sql: "numeric", gen: genBigNumeric, render: "plain"},
	{name: "text", sql: "text", gen: genText, toast: true, keyable: true, render: "text"},
	{name: "varchar", sql: "varchar(40)", gen: genShortText(40), keyable: true, render: "text"},
	{name: "char5", sql: "char(5)", gen: genShortText(5), render: "char5"},
	{name: "bytea", sql: "bytea", gen: genBytea, toast: true, render: "bytea"},
	{name: "bool", sql: "boolean", gen: genBool, render: "bool"},
	{name: "uuid", sql: "uuid", gen: genUUID, keyable: true, render: "plain"},
	{name: "date", sql: "date", gen: genDate(false), keyable: true, render: "date"},
	{name: "dateinf", sql: "date", gen: genDate(true), render: "date", textOnModern: true},
	{name: "ts", sql: "timestamp", gen: genTimestamp(false, false), keyable: true, render: "micros"},
	{name: "tsinf", sql: "timestamp", gen: genTimestamp(false, true), render: "micros", textOnModern: true},
	{name: "tstz", sql: "timestamptz", gen: genTimestamp(true, false), render: "micros"},
	{name: "time", sql: "time", gen: genTime, render: "micros"},
	{name: "interval", sql: "interval", gen: genInterval, render: "plain"},
	{name: "inet", sql: "inet", gen: genInet, render: "plain"},
	{name: "jsonb", sql: "jsonb", gen: genJSON, toast: true, render: "plain"},
	{name: "json", sql: "json", gen: genJSON, render: "plain"},
	{name: "int4arr", sql: "integer[] NOT NULL DEFAULT '{}'", gen: genIntArray, render: "intarr"},
	{name: "textarr", sql: "text[] NOT NULL DEFAULT '{}'", gen: genTextArray, render: "textarr"},
	{name: "int4arrnull", sql: "integer[]", gen: genIntArray, render: "plain"},
	{name: "mood", sql: "mood", gen: genMood, render: "plain"},
}

func typeByName(n string) colType {
	for _, t := range types {
		if t.name == n {
			return t
		}
	}
	panic("torture: no type " + n)
}

func genInt(lo, hi int64) func(*rand.Rand, bool) string {
	return func(r *rand.Rand, _ bool) string {
		switch r.IntN(8) {
		case 0:
			return fmt.Sprint(lo)
		case 1:
			return fmt.Sprint(hi)
		case 2:
			return "0"
		}
		return fmt.Sprint(r.Int64N(2001) - 1000)
	}
}

// genFloat keeps finite values dyadic and small, so that PostgreSQL's and
// ClickHouse's shortest decimal renderings are the same text.
func genFloat(r *rand.Rand, _ bool) string {
	switch r.IntN(10) {
	case 0:
		return "NaN"
	case 1:
		return "Infinity"
	case 2:
		return "-Infinity"
	case 3:
		return "0"
	}
	return fmt.Sprint(float64(r.IntN(1<<20)-1<<19) / 8)
}

func digits(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String()
}

func genDecimal(intDigits, scale int) func(*rand.Rand, bool) string {
	return func(r *rand.Rand, _ bool) string {
		sign := ""
		if r.IntN(2) == 0 {
			sign = "-"
		}
		n := intDigits
		if r.IntN(3) > 0 {
			n = 1 + r.IntN(intDigits)
		}
		return sign + digits(r, n) + "." + digits(r, scale)
	}
}

// genBigNumeric gives unconstrained numerics beyond Decimal's 38 digits.
func genBigNumeric(r *rand.Rand, _ bool) string {
	switch r.IntN(8) {
	case 0:
		return "NaN"
	case 1:
		return "Infinity"
	case 2:
		return "-Infinity"
	case 3:
		return "0.000"
	}
	return "-" + digits(r, 30+r.IntN(20)) + "." + digits(r, 1+r.IntN(20))
}

var textPieces = []string{"a", "Z", "é", "日本", "😀", "'", "''", "\"", "\\", "\\\\", " ", "\t", "\n", "\r", ",", "{", "}", "(", ")", "NULL", "\\N", "$$", "ß", "\u00a0", "ǅ"}

func genShortText(max int) func(*rand.Rand, bool) string {
	return func(r *rand.Rand, _ bool) string {
		var b strings.Builder
		n := r.IntN(max + 1)
		for i := 0; i < n; i++ {
			p := textPieces[r.IntN(len(textPieces))]
			if len([]rune(b.String()))+len([]rune(p)) > max {
				break
			}
			b.WriteString(p)
		}
		return b.String()
	}
}

// genText gives short awkward strings, or with big a body of 3–40 kB
// that differs per row (a repeated one would compress below the TOAST
// threshold under other storage).
func genText(r *rand.Rand, big bool) string {
	if !big {
		return genShortText(30)(r, false)
	}
	n := 3000 + r.IntN(37000)
	b := make([]byte, 0, n)
	for len(b) < n {
		b = append(b, textPieces[r.IntN(len(textPieces))]...)
		b = append(b, byte('a'+r.IntN(26)))
	}
	return string(b)
}

func genBytea(r *rand.Rand, big bool) string {
	n := r.IntN(20)
	if big {
		n = 3000 + r.IntN(30000)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return fmt.Sprintf("\\x%x", b)
}

func genBool(r *rand.Rand, _ bool) string { return []string{"true", "false"}[r.IntN(2)] }

func genUUID(r *rand.Rand, _ bool) string {
	if r.IntN(10) == 0 {
		return "00000000-0000-0000-0000-000000000000"
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func genDate(inf bool) func(*rand.Rand, bool) string {
	return func(r *rand.Rand, _ bool) string {
		switch r.IntN(8) {
		case 0:
			return "1900-01-01"
		case 1:
			return "2299-12-31"
		case 2:
			return "1970-01-01"
		case 3:
			if inf {
				return []string{"infinity", "-infinity"}[r.IntN(2)]
			}
		}
		return fmt.Sprintf("%04d-%02d-%02d", 1900+r.IntN(400), 1+r.IntN(12), 1+r.IntN(28))
	}
}

func genTimestamp(tz, inf bool) func(*rand.Rand, bool) string {
	return func(r *rand.Rand, _ bool) string {
		zone := ""
		if tz {
			zone = []string{"+00", "+05:30", "-08", "+14"}[r.IntN(4)]
		}
		switch r.IntN(8) {
		case 0:
			return "1900-01-02 00:00:00" + zone // after the zone shift still ≥ 1900
		case 1:
			return "2299-12-30 23:59:59.999999" + zone
		case 2:
			return "1969-12-31 23:59:59.999999" + zone
		case 3:
			if inf {
				return []string{"infinity", "-infinity"}[r.IntN(2)]
			}
			return "2262-04-12 00:00:00.000001" + zone // past UnixNano's range
		}
		return fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d.%06d%s", 1901+r.IntN(398), 1+r.IntN(12), 1+r.IntN(28),
			r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000000), zone)
	}
}

func genTime(r *rand.Rand, _ bool) string {
	switch r.IntN(6) {
	case 0:
		return "00:00:00"
	case 1:
		return "24:00:00"
	case 2:
		return "23:59:59.999999"
	}
	return fmt.Sprintf("%02d:%02d:%02d.%06d", r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000000))
}

func genInterval(r *rand.Rand, _ bool) string {
	return fmt.Sprintf("%d years %d mons %d days %d:%02d:%02d.%06d", r.IntN(200)-100, r.IntN(12), r.IntN(40)-20,
		r.IntN(100), r.IntN(60), r.IntN(60), r.IntN(1000000))
}

func genInet(r *rand.Rand, _ bool) string {
	if r.IntN(3) == 0 {
		return fmt.Sprintf("2001:db8::%x/%d", r.IntN(65536), 64+r.IntN(65))
	}
	return fmt.Sprintf("%d.%d.%d.%d/%d", r.IntN(256), r.IntN(256), r.IntN(256), r.IntN(256), 8+r.IntN(25))
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20:
			fmt.Fprintf(&b, "\\u%04x", c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func genJSON(r *rand.Rand, big bool) string {
	if big {
		return `{"body": ` + jsonString(genText(r, true)) + `, "n": ` + fmt.Sprint(r.IntN(1000)) + `}`
	}
	switch r.IntN(5) {
	case 0:
		return "null"
	case 1:
		return "[]"
	case 2:
		return fmt.Sprintf(`{"a": %d, "b": [1, 2.50, null, true], "c": {"d": %s}}`, r.IntN(100), jsonString(genShortText(10)(r, false)))
	}
	return `{ "k" : ` + jsonString(genShortText(12)(r, false)) + `,"k":1}`
}

func genIntArray(r *rand.Rand, _ bool) string {
	n := r.IntN(5)
	parts := make([]string, n)
	for i := range parts {
		if r.IntN(4) == 0 {
			parts[i] = "NULL"
		} else {
			parts[i] = fmt.Sprint(r.IntN(2000) - 1000)
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func genTextArray(r *rand.Rand, _ bool) string {
	n := r.IntN(4)
	parts := make([]string, n)
	for i := range parts {
		if r.IntN(4) == 0 {
			parts[i] = "NULL"
			continue
		}
		s := genShortText(8)(r, false)
		s = strings.ReplaceAll(s, `\`, `\\`)
		s = strings.ReplaceAll(s, `"`, `\"`)
		parts[i] = `"` + s + `"`
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func genMood(r *rand.Rand, _ bool) string {
	return []string{"sad", "ok", "happy", "très \"bien\""}[r.IntN(4)]
}
