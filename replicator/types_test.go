package replicator_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// typeColumn is one column of the types table, with how to read it on each
// side so that equal values print alike, independently of ferry's code.
type typeColumn struct {
	name, pgType string
	pgExpr       string              // PostgreSQL expression giving text; %s is the column
	chExpr       string              // ClickHouse expression giving a String; %s is the column
	norm         func(string) string // applied to both sides, when their spellings differ
	oldOnly      bool                // the expressions read 18.16's integer temporal forms; String of the text on 26.7
	// viaDriver reads the ClickHouse column through the driver's decoding
	// instead of toString(), which on 18.16 prints Decimal128 wrongly.
	viaDriver bool
}

func floatNorm(bits int) func(string) string {
	return func(s string) string {
		if s == `\N` {
			return s
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil {
			return "unparsable " + s
		}
		return strconv.FormatFloat(f, 'g', -1, bits)
	}
}

func boolNorm(s string) string {
	switch s {
	case "t", "true", "1":
		return "1"
	case "f", "false", "0":
		return "0"
	}
	return s
}

var typeColumns = []typeColumn{
	{name: "i2", pgType: "smallint"},
	{name: "i4", pgType: "integer"},
	{name: "i8", pgType: "bigint"},
	{name: "f4", pgType: "real", norm: floatNorm(32)},
	{name: "f8", pgType: "double precision", norm: floatNorm(64)},
	{name: "n102", pgType: "numeric(10,2)"},
	{name: "n380", pgType: "numeric(38,0)", viaDriver: true},
	{name: "nu", pgType: "numeric"},
	{name: "t", pgType: "text"},
	{name: "vc", pgType: "varchar(10)"},
	{name: "bp", pgType: "char(5)", pgExpr: "%s"}, // %s, not %s::text, which would strip the padding
	{name: "b", pgType: "boolean", norm: boolNorm},
	{name: "d", pgType: "date", pgExpr: "CASE WHEN isfinite(%s) THEN (%s - date '1970-01-01')::text WHEN %s > 'epoch' THEN '2147483647' WHEN %s < 'epoch' THEN '-2147483648' END", oldOnly: true},
	{name: "ts", pgType: "timestamp", pgExpr: microsSinceEpoch, oldOnly: true},
	{name: "tstz", pgType: "timestamptz", pgExpr: microsSinceEpoch, oldOnly: true},
	{name: "tm", pgType: "time", pgExpr: "(extract(epoch FROM %s) * 1000000)::bigint::text"},
	{name: "u", pgType: "uuid"},
	{name: "j", pgType: "json"},
	{name: "jb", pgType: "jsonb"},
	{name: "by", pgType: "bytea", pgExpr: "encode(%s, 'hex')", chExpr: "lower(hex(%s))"},
	{name: "e", pgType: "mood"},
	{name: "ai", pgType: "int4[] NOT NULL DEFAULT '{}'", pgExpr: "replace(array_to_json(%s)::text, 'null', 'NULL')"},
	{name: "at", pgType: "text[]"},
	{name: "iv", pgType: "interval"},
	{name: "net", pgType: "inet", pgExpr: "%s"}, // inet's text output, which ::text would give a netmask
	{name: "cid", pgType: "cidr", pgExpr: "%s"},
	{name: "mac", pgType: "macaddr"},
	{name: "mny", pgType: "money"},
	{name: "bits", pgType: "bit(4)"},
	{name: "vbits", pgType: "varbit"},
	{name: "tsv", pgType: "tsvector"},
	{name: "x", pgType: "xml"},
	{name: "ttz", pgType: "timetz"},
	{name: "lsn", pgType: "pg_lsn", pgExpr: "(%s - '0/0')::text"},
	{name: "rng", pgType: "int4range"},
	{name: "trng", pgType: "tstzrange"},
	{name: "pt", pgType: "point"},
	{name: "bx", pgType: "box"},
	{name: "poly", pgType: "polygon"},
	{name: "circ", pgType: "circle"},
	{name: "grid", pgType: "int[][]"},
	{name: "hs", pgType: "hstore"},
	{name: "ci", pgType: "citext"},
	{name: "dom", pgType: "positive"},
}

// microsSinceEpoch reads a timestamp as ClickHouse 18.16 holds it: an Int64
// of microseconds since 1970, with infinity the largest and smallest Int64.
const microsSinceEpoch = "CASE WHEN isfinite(%s) THEN (extract(epoch FROM %s) * 1000000)::bigint::text " +
	"WHEN %s > 'epoch' THEN '9223372036854775807' WHEN %s < 'epoch' THEN '-9223372036854775808' END"

// typeRows are the rows the types table starts with: extremes, odd values
// and NULLs, in column order.
var typeRows = []string{
	`1, 32767, 2147483647, 9223372036854775807, '3.4028235e+38', '1.7976931348623157e308', 99999999.99,
	 99999999999999999999999999999999999999, '123456789012345678901234567890123456789012345.123456789',
	 'ünïcødé ✓ "quotes" ''apos'' ` + "`bt`" + ` \ back', 'abcdefghij', 'ab', true,
	 '5874897-12-31', '200000-01-01 00:00:00.000001', '200000-01-01 00:00:00.000001+00', '24:00:00',
	 'ffffffff-ffff-ffff-ffff-ffffffffffff', '{"b": 1,   "a": [1, 2.50]}', '{"b": 1,   "a": [1, 2.50]}', '\x00ff0a27',
	 'happy', '{2147483647,NULL,-1}', '{"a b",NULL,"NULL","q\"uote","back\\slash",""}', '1 year 2 mons 3 days 04:05:06.789', '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '1234.56', B'1010', B'101', 'a fat cat', '<a>x</a>', '04:05:06.789+05:30', '16/B374D848', '[1,10)', '[2024-01-01 00:00:00+00,infinity)', '(1.5,-2)', '(1,1),(0,0)', '((0,0),(1,1),(1,0))', '<(0,0),2>', '{{1,2},{3,NULL}}', 'a=>1, "b c"=>NULL', 'MiXeD', 42`,
	`2, -32768, -2147483648, -9223372036854775808, '-Infinity', '5e-324', -99999999.99,
	 -99999999999999999999999999999999999999, 'NaN', '', '', '', false,
	 '4713-01-01 BC', '4713-11-24 00:00:00 BC', '1969-07-20 20:17:40.123456+00', '00:00:00',
	 '00000000-0000-0000-0000-000000000000', '[]', '{}', '\x', 'sad', '{}', '{}', '-1 days', '::1', '::/0', 'ff:ff:ff:ff:ff:ff', '-0.01', B'0000', B'', '', '<empty/>', '00:00:00+00', '0/0', 'empty', '(,)', '(0,0)', '(0,0),(0,0)', '((0,0))', '<(1e+300,-1e-300),0>', '{}', '', '', 1`,
	`3, 0, 1, -1, 'NaN', 0.1, 0.01, 0, '0.000000000000000000000000000000000000000000001',
	 E'line1\nline2\ttab\r\\', 'x', 'abcde', NULL, '2024-02-29', '2024-02-29 12:34:56.789012',
	 '2024-02-29 12:34:56.789012+05:30', '12:34:56.789012', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
	 'null', '{"k": "vé"}', '\x7f', 'ok', '{1}', NULL, '00:00:00.000001', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'FFFFFFFF/FFFFFFFF', NULL, NULL, NULL, NULL, NULL, NULL, '{{{1}}}', NULL, NULL, NULL`,
	`4, NULL, NULL, NULL, '1e-45', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	 NULL, NULL, NULL, NULL, '{NULL}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
	`5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'infinity', '-infinity', 'infinity', NULL, NULL, NULL, NULL, NULL, NULL, '{}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
}

// TestEveryType sends every mapped type's extremes through the initial copy
// (COPY) and through the stream (pgoutput), and compares ClickHouse with
// PostgreSQL column by column, reading each side with its own functions.
// The table's arrays and network types keep its copy in text format; a
// second table of the columns ferry reads in binary form (binaryTypes) is
// copied in binary format.
func TestEveryType(t *testing.T) {
	e := newEnv(t)
	var cols, names []string
	for _, c := range typeColumns {
		cols = append(cols, `"`+c.name+`" `+c.pgType)
		names = append(names, `"`+c.name+`"`)
	}
	e.exec(`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`, `CREATE EXTENSION IF NOT EXISTS hstore`, `CREATE EXTENSION IF NOT EXISTS citext`,
		`CREATE DOMAIN positive AS int CHECK (VALUE > 0)`,
		`CREATE TABLE types (id int PRIMARY KEY, `+strings.Join(cols, ", ")+`)`)
	for _, r := range typeRows {
		e.exec(`INSERT INTO types (id, ` + strings.Join(names, ", ") + `) VALUES (` + r + `)`)
	}
	modern := e.sink().Capabilities().DateTime64
	binCols := binaryTypes(modern)
	var binNames []string
	for _, c := range binCols {
		binNames = append(binNames, `"`+c.name+`"`)
	}
	e.exec(`CREATE TABLE btypes AS SELECT id, `+strings.Join(binNames, ", ")+` FROM types`, `ALTER TABLE btypes ADD PRIMARY KEY (id)`)
	logs, seen := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))
	if modern {
		// The rows hold dates and timestamps past Date32's and DateTime64's
		// range (TestTemporalRange covers those types), which ferry refuses
		// there: the documented fix is --text-columns.
		cfg.TextColumns = []string{"public.types.d", "public.types.ts", "public.types.tstz"}
	}
	e.mustCatchUp(cfg) // rows 1–4 through COPY
	formats := map[string]any{}
	for _, entry := range seen.FilterMessage("copied table").All() {
		fields := entry.ContextMap()
		formats[fields["table"].(string)] = fields["format"]
	}
	if formats["public.types"] != "text" || formats["public.btypes"] != "binary" {
		t.Fatalf("the copies' formats: %v, want types in text and btypes in binary", formats)
	}
	e.exec(`INSERT INTO types SELECT id + 100, ` + strings.Join(names, ", ") + ` FROM types`)
	e.exec(`UPDATE types SET i2 = 7 WHERE id = 104`)
	e.exec(`INSERT INTO btypes SELECT id + 100, ` + strings.Join(binNames, ", ") + ` FROM btypes`)
	e.mustCatchUp(cfg) // rows 101–104 through pgoutput
	e.verifyAll(cfg)
	checkTypes(e, "types", typeColumns, modern)
	checkTypes(e, "btypes", binCols, modern)
}

// binaryTypes are the columns of typeColumns that ferry reads in binary
// form, but on 26.7 the dates and timestamps, whose rows need
// --text-columns there (which makes a table's copy text).
func binaryTypes(modern bool) []typeColumn {
	var cols []typeColumn
	for _, c := range typeColumns {
		if c.name == "ai" {
			break // the first column of a type read as text only
		}
		if !(modern && c.oldOnly) {
			cols = append(cols, c)
		}
	}
	return cols
}

// checkTypes compares the columns cols of table in ClickHouse with
// PostgreSQL's.
func checkTypes(e *env, table string, cols []typeColumn, modern bool) {
	e.t.Helper()
	for _, c := range cols {
		pgExpr, chExpr := c.pgExpr, c.chExpr
		if c.oldOnly && modern {
			pgExpr, chExpr = "%s::text", "%s" // String of PostgreSQL's text (--text-columns)
		}
		if pgExpr == "" {
			pgExpr = "%s::text"
		}
		if chExpr == "" {
			chExpr = "toString(%s)"
		}
		col := `"` + c.name + `"`
		pg := e.pgStrings("SELECT id::text, " + strings.ReplaceAll(pgExpr, "%s", col) + " FROM " + table + " ORDER BY " + table + ".id")
		var ch [][]string
		if c.viaDriver {
			ch = e.chDecimals("SELECT toString(id), `" + c.name + "` FROM " + e.table(table) + " FINAL WHERE _ferry_deleted = 0 ORDER BY id")
		} else {
			ch = e.chStrings("SELECT toString(id), ifNull(" + strings.ReplaceAll(chExpr, "%s", "`"+c.name+"`") + `, '\\N') FROM ` +
				e.table(table) + " FINAL WHERE _ferry_deleted = 0 ORDER BY id")
		}
		if c.norm != nil {
			for _, rows := range [][][]string{pg, ch} {
				for _, r := range rows {
					r[1] = c.norm(r[1])
				}
			}
		}
		sameRows(e.t, table+" column "+c.name, ch, pg)
	}
}

// chDecimals runs a query of (String, Nullable(Decimal)) rows.
func (e *env) chDecimals(query string) [][]string {
	e.t.Helper()
	rows, err := e.ch.Query(context.Background(), query)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var id string
		var d *decimal.Decimal
		if err := rows.Scan(&id, &d); err != nil {
			e.t.Fatalf("%s: %v", query, err)
		}
		v := `\N`
		if d != nil {
			v = d.String()
		}
		out = append(out, []string{id, v})
	}
	return out
}
