package torture

import (
	"context"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"
)

// The fingerprint renders every live row as one canonical text on each
// side, in that side's SQL, and sums two 32-bit slices of its MD5 (and
// counts the rows). It shares nothing with ferry's verify: the rendering
// is derived from the PostgreSQL type and the ClickHouse column type read
// from the servers, not from ferry's type mapping.

// pgCol is a column as PostgreSQL's catalog describes it.
type pgCol struct {
	Name    string
	Type    string // format_type
	NotNull bool
}

// renderPG is the canonical text of column c in PostgreSQL SQL; chType is
// the ClickHouse column's type with Nullable/LowCardinality removed.
func renderPG(c pgCol, chType string) string {
	x := quoteIdent(c.Name)
	t := c.Type
	chString := chType == "String"
	switch {
	case t == "real" || t == "double precision":
		return "CASE WHEN " + x + " = 'NaN' THEN 'nan' WHEN " + x + " = 'Infinity' THEN 'inf' WHEN " + x + " = '-Infinity' THEN '-inf' ELSE " + x + "::text END"
	case strings.HasPrefix(t, "numeric(") && !chString:
		return "trim_scale(" + x + ")::text"
	case strings.HasPrefix(t, "character("):
		var n int
		fmt.Sscanf(t, "character(%d)", &n)
		return fmt.Sprintf("rpad(%s::text, %d)", x, n)
	case t == "bytea":
		return "encode(" + x + ", 'hex')"
	case t == "boolean":
		return "CASE WHEN " + x + " THEN 'true' WHEN NOT " + x + " THEN 'false' END"
	case t == "date" && !chString:
		return "CASE WHEN " + x + " = 'infinity' THEN '2147483647' WHEN " + x + " = '-infinity' THEN '-2147483648' ELSE (" + x + " - DATE '1970-01-01')::text END"
	case strings.HasPrefix(t, "timestamp") && !chString:
		return "CASE WHEN " + x + " = 'infinity' THEN '9223372036854775807' WHEN " + x + " = '-infinity' THEN '-9223372036854775808' ELSE (extract(epoch FROM " + x + ") * 1000000)::bigint::text END"
	case strings.HasPrefix(t, "time") && !chString:
		return "(extract(epoch FROM " + x + ") * 1000000)::bigint::text"
	case t == "integer[]" && strings.HasPrefix(chType, "Array"):
		return "array_to_string(" + x + ", ',', 'N')"
	case t == "text[]" && strings.HasPrefix(chType, "Array"):
		return "array_to_string(ARRAY(SELECT coalesce(encode(convert_to(e, 'UTF8'), 'hex'), 'N') FROM unnest(" + x + ") WITH ORDINALITY AS u(e, o) ORDER BY o), ',')"
	}
	// The output function's text, which is what ferry sends for a column
	// it keeps as String (x::text differs for inet: a /32 keeps its mask).
	return "format('%s', " + x + ")"
}

// renderCH is the same canonical text in ClickHouse SQL, chosen by the
// ClickHouse column's type (bare: no Nullable or LowCardinality).
func renderCH(x, chType string) string {
	switch {
	case strings.HasPrefix(chType, "Float"):
		return "if(isNaN(" + x + "), 'nan', if(isInfinite(" + x + "), if(" + x + " > 0, 'inf', '-inf'), toString(" + x + ")))"
	case strings.HasPrefix(chType, "Decimal"):
		// Drop the scale's trailing zeros, as trim_scale does (26.7
		// drops them itself, 18.16 keeps them).
		return "replaceRegexpOne(toString(" + x + `), '^(-?[0-9]+)(\\.[0-9]*[1-9])?\\.?0*$', '\\1\\2')`
	case chType == "Bool":
		return "if(" + x + ", 'true', 'false')"
	case chType == "Date32":
		return "toString(toInt32(" + x + "))"
	case strings.HasPrefix(chType, "DateTime64"):
		return "toString(toUnixTimestamp64Micro(" + x + "))"
	case strings.HasPrefix(chType, "Array(Nullable(String))"):
		return "arrayStringConcat(arrayMap(e -> ifNull(lower(hex(e)), 'N'), " + x + "), ',')"
	case strings.HasPrefix(chType, "Array"):
		return "arrayStringConcat(arrayMap(e -> ifNull(toString(e), 'N'), " + x + "), ',')"
	case chType == "String":
		return x
	}
	return "toString(" + x + ")"
}

// bytesHex marks a PostgreSQL bytea, which ClickHouse holds as raw bytes.
// x is the column's expression with NULL taken care of (assumeNotNull).
func renderCHFor(c pgCol, x, chType string) string {
	if c.Type == "bytea" {
		return "lower(hex(" + renderCH(x, chType) + "))"
	}
	if c.Type == "boolean" && chType == "UInt8" {
		return renderCH(x, "Bool")
	}
	return renderCH(x, chType)
}

func chIdent(name string) string {
	return "`" + strings.ReplaceAll(strings.ReplaceAll(name, `\`, `\\`), "`", "\\`") + "`"
}

// pieces are each side's per-column text: a length-prefixed rendering,
// or N for NULL, decided on the column itself so that no rendering has
// to carry NULL through (CASE WHEN NULL and 18.16's if() treat it apart).
func pieces(cols []pgCol, chTypes map[string]string) (pg, ch []string) {
	for _, c := range cols {
		bt := bareCH(chTypes[c.Name])
		x := quoteIdent(c.Name)
		p := renderPG(c, bt)
		pg = append(pg, "CASE WHEN "+x+" IS NULL THEN 'N' ELSE octet_length("+p+")::text || ':' || "+p+" END")
		y := chIdent(c.Name)
		q := renderCHFor(c, "assumeNotNull("+y+")", bt)
		ch = append(ch, "if(isNull("+y+"), 'N', concat(toString(length("+q+")), ':', "+q+"))")
	}
	return pg, ch
}

func bareCH(t string) string {
	for _, p := range []string{"Nullable(", "LowCardinality("} {
		if strings.HasPrefix(t, p) {
			return bareCH(t[len(p) : len(t)-1])
		}
	}
	return t
}

// rowExprs builds each side's row text: a length-prefixed piece per
// column, NULL as N, so that no two rows render alike by accident.
func rowExprs(cols []pgCol, chTypes map[string]string) (pg, ch string) {
	ps, cs := pieces(cols, chTypes)
	// 18.16's concat takes two arguments at least.
	return "concat_ws('|', " + strings.Join(ps, ", ") + ")", "concat(" + strings.Join(cs, ", '|', ") + ", '')"
}

// fingerprint is a table's row count and two sums of hash slices.
type fingerprint struct {
	Rows       uint64
	SumA, SumB string
}

// pgFingerprint is the fingerprint of the rows of table qt; with distinct
// set, rows of the same text count once.
func pgFingerprint(ctx context.Context, pg *pgx.Conn, qt, row string, distinct bool) (fingerprint, error) {
	q := `SELECT count(*), coalesce(sum(('x' || substr(h, 1, 8))::bit(32)::bigint), 0)::text,
	  coalesce(sum(('x' || substr(h, 9, 8))::bit(32)::bigint), 0)::text FROM (SELECT ` + distinctIf(distinct) + `md5(` + row + `) h FROM ` + qt + `) s`
	var f fingerprint
	err := pg.QueryRow(ctx, q).Scan(&f.Rows, &f.SumA, &f.SumB)
	return f, err
}

func chFingerprint(ctx context.Context, ch driver.Conn, from, row string) (fingerprint, error) {
	q := `SELECT count(), toString(sum(reinterpretAsUInt32(reverse(unhex(substring(h, 1, 8)))))),
	  toString(sum(reinterpretAsUInt32(reverse(unhex(substring(h, 9, 8)))))) FROM (SELECT hex(MD5(` + row + `)) AS h FROM ` + from + `)`
	var f fingerprint
	err := ch.QueryRow(ctx, q).Scan(&f.Rows, &f.SumA, &f.SumB)
	return f, err
}

// rowHashes maps key text to row hashes (a multiset for tables whose id
// is no key), for naming the rows that differ.
func pgRowHashes(ctx context.Context, pg *pgx.Conn, qt, key, row string, distinct bool) (map[string][]string, error) {
	rows, err := pg.Query(ctx, `SELECT `+distinctIf(distinct)+key+`, md5(`+row+`) FROM `+qt)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var k, h string
		if err := rows.Scan(&k, &h); err != nil {
			return nil, err
		}
		out[k] = append(out[k], h)
	}
	return out, rows.Err()
}

func chRowHashes(ctx context.Context, ch driver.Conn, from, key, row string) (map[string][]string, error) {
	rows, err := ch.Query(ctx, `SELECT `+key+`, lower(hex(MD5(`+row+`))) FROM `+from)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var k, h string
		if err := rows.Scan(&k, &h); err != nil {
			return nil, err
		}
		out[k] = append(out[k], h)
	}
	return out, rows.Err()
}

func distinctIf(b bool) string {
	if b {
		return "DISTINCT "
	}
	return ""
}
