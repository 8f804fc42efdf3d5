package replicator_test

import (
	"strconv"
	"strings"
	"testing"
)

// rangeColumn is one column of a range test: how each side renders it as
// text, with the server's own functions. chModern reads the ClickHouse ≥
// 22.8 type, chLegacy the form 18.16 gets; pgModern and pgLegacy are the
// PostgreSQL renderings that must equal them (pgLegacy defaults to
// pgModern). %s is the column.
type rangeColumn struct {
	name, pgType       string
	pgModern, pgLegacy string
	chModern, chLegacy string
}

// Renderings shared by the range tests. PostgreSQL's to_char and
// ClickHouse's toString of DateTime64(6, 'UTC') print the same digits; an
// array is its elements joined by commas, NULL spelled out.
const (
	pgMicroText   = "to_char(%s, 'YYYY-MM-DD HH24:MI:SS.US')"
	pgMicroTextTZ = "to_char(%s AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
	pgDayText     = "to_char(%s, 'YYYY-MM-DD')"
	pgDays        = "(%s - date '1970-01-01')::text"
	pgMicros      = "(extract(epoch FROM %s) * 1000000)::bigint::text"
)

// pgArray renders an array column element by element with elem (%s the
// element).
func pgArray(elem string) string {
	return "(SELECT coalesce(string_agg(coalesce(" + strings.ReplaceAll(elem, "%s", "x") +
		", 'NULL'), ',' ORDER BY o), '') FROM unnest(%s) WITH ORDINALITY u(x, o))"
}

// chArray renders an array column element by element with elem (%s the
// element).
func chArray(elem string) string {
	return "arrayStringConcat(arrayMap(x -> ifNull(" + strings.ReplaceAll(elem, "%s", "x") + ", 'NULL'), %s), ',')"
}

var temporalColumns = []rangeColumn{
	{name: "ts", pgType: "timestamp", pgModern: pgMicroText, pgLegacy: pgMicros, chModern: "toString(%s)", chLegacy: "toString(%s)"},
	{name: "tstz", pgType: "timestamptz", pgModern: pgMicroTextTZ, pgLegacy: pgMicros, chModern: "toString(%s)", chLegacy: "toString(%s)"},
	{name: "d", pgType: "date", pgModern: pgDayText, pgLegacy: pgDays, chModern: "toString(%s)", chLegacy: "toString(%s)"},
	{name: "ats", pgType: "timestamp[] NOT NULL", pgModern: pgArray(pgMicroText), pgLegacy: pgArray(pgMicros),
		chModern: chArray("toString(%s)"), chLegacy: chArray("toString(%s)")},
	{name: "ad", pgType: "date[] NOT NULL", pgModern: pgArray(pgDayText), pgLegacy: pgArray(pgDays),
		chModern: chArray("toString(%s)"), chLegacy: chArray("toString(%s)")},
	// Filled by temporalSetup: long enough to be stored out of line.
	{name: "bts", pgType: "timestamp[] NOT NULL DEFAULT '{}'", pgModern: pgArray(pgMicroText), pgLegacy: pgArray(pgMicros),
		chModern: chArray("toString(%s)"), chLegacy: chArray("toString(%s)")},
}

// temporalSetup makes bts an array of 300 copies of ts.
var temporalSetup = []string{`UPDATE temporal SET bts = array_fill(ts, ARRAY[300]) WHERE ts IS NOT NULL`}

// temporalRows are the edges of DateTime64(6) and Date32 (1900-01-01 to
// 2299-12-31), and those of the driver's nanoseconds since 1970 (which end
// at 2262-04-11 23:47:16.854775807), in temporalColumns' order.
var temporalRows = []string{
	`'1900-01-01 00:00:00', '1900-01-01 00:00:00+00', '1900-01-01', '{"1900-01-01 00:00:00",NULL}', '{1900-01-01,NULL}', '{}'`,
	`'1900-01-01 00:00:00.000001', '1900-01-01 00:00:00.000001+00', '1969-12-31', '{"1900-01-01 00:00:00.000001"}', '{1969-12-31}', '{}'`,
	`'1969-12-31 23:59:59.999999', '1970-01-01 00:00:00+00', '1970-01-01', '{"1969-12-31 23:59:59.999999"}', '{1970-01-01}', '{}'`,
	`'2262-04-11 23:47:16.854775', '2262-04-11 23:47:16.854775+00', '2262-04-11', '{"2262-04-11 23:47:16.854775"}', '{2262-04-11}', '{}'`,
	`'2262-04-11 23:47:16.854776', '2262-04-12 00:00:00+00', '2262-04-12', '{"2262-04-11 23:47:16.854776"}', '{2262-04-12}', '{}'`,
	`'2270-06-01 12:00:00', '2270-06-01 12:00:00+00', '2270-06-01', '{"2270-06-01 12:00:00",NULL,"2024-02-29 12:34:56.789012"}', '{2270-06-01,NULL}', '{}'`,
	`'2299-12-31 23:59:59.999999', '2300-01-01 04:59:59.999999+05', '2299-12-31', '{"2299-12-31 23:59:59.999999"}', '{2299-12-31}', '{}'`,
	`NULL, NULL, NULL, '{}', '{}', '{}'`,
}

// TestTemporalRange sends every edge of the temporal types through the
// initial copy, the stream, and the stream's lookup of unchanged TOAST
// values (the arrays are stored out of line, so an update of another
// column sends them as unchanged and ferry reads them back from
// ClickHouse), and compares each server's rendering with PostgreSQL's.
func TestTemporalRange(t *testing.T) {
	e := newEnv(t)
	// A timestamp key past 2262: the lookup of its unchanged values finds
	// the row by that key.
	e.exec(`CREATE TABLE tkey (k timestamp PRIMARY KEY, n int NOT NULL, pad text NOT NULL)`,
		`ALTER TABLE tkey ALTER COLUMN pad SET STORAGE EXTERNAL`,
		`INSERT INTO tkey VALUES ('2270-06-01 12:00:00', 0, repeat('a', 3000)), ('2299-12-31 23:59:59.999999', 0, repeat('b', 3000))`)
	checkRange(t, e, "temporal", temporalColumns, temporalRows, temporalSetup...)
	cfg := e.config()
	e.exec(`UPDATE tkey SET n = 1`)
	e.mustCatchUp(cfg)
	want := [][]string{{"2270-06-01 12:00:00.000000", "1", "a"}, {"2299-12-31 23:59:59.999999", "1", "b"}}
	if !e.sink().Capabilities().DateTime64 {
		want[0][0], want[1][0] = "9480196800000000", "10413791999999999"
	}
	sameRows(t, "tkey", e.chStrings("SELECT toString(k), toString(n), substring(pad, 1, 1) FROM "+e.table("tkey")+
		" FINAL WHERE _ferry_deleted = 0 AND length(pad) = 3000 ORDER BY k"), want)
}

// checkRange creates a table of cols holding rows (then runs setup),
// replicates it through the copy (ids 1..n), the stream (ids 101..) and an
// update of every row that leaves the long values unchanged, then compares
// every column of every row as each side renders it, and runs verify.
func checkRange(t *testing.T, e *env, table string, cols []rangeColumn, rows []string, setup ...string) {
	t.Helper()
	defs := []string{"id int PRIMARY KEY", "n int NOT NULL DEFAULT 0", "pad text NOT NULL DEFAULT ''"}
	var names []string
	for _, c := range cols {
		defs = append(defs, c.name+" "+c.pgType)
		names = append(names, c.name)
	}
	list := strings.Join(names, ", ")
	e.exec(`CREATE TABLE `+table+` (`+strings.Join(defs, ", ")+`)`,
		// Out of line storage and a pad past the TOAST threshold make an
		// update of n send every long value as unchanged.
		`ALTER TABLE `+table+` ALTER COLUMN pad SET STORAGE EXTERNAL`)
	for _, c := range cols {
		if strings.Contains(c.pgType, "[]") {
			e.exec(`ALTER TABLE ` + table + ` ALTER COLUMN ` + c.name + ` SET STORAGE EXTERNAL`)
		}
	}
	for i, r := range rows {
		e.exec(`INSERT INTO ` + table + ` (id, pad, ` + list + `) VALUES (` + strconv.Itoa(i+1) + `, repeat('p', 3000), ` + r + `)`)
	}
	e.exec(setup...)
	cfg := e.config()
	e.mustCatchUp(cfg) // through COPY
	e.exec(`INSERT INTO ` + table + ` (id, pad, ` + list + `) SELECT id + 100, pad, ` + list + ` FROM ` + table)
	e.mustCatchUp(cfg) // through pgoutput
	e.exec(`UPDATE ` + table + ` SET n = n + 1`)
	e.mustCatchUp(cfg) // unchanged values looked up in ClickHouse
	if got := e.chStrings("SELECT toString(count()) FROM " + e.table(table) + " FINAL WHERE _ferry_deleted = 0 AND n = 1 AND length(pad) = 3000"); got[0][0] != strconv.Itoa(2*len(rows)) {
		t.Errorf("%s rows updated in ClickHouse, want %d", got[0][0], 2*len(rows))
	}
	modern := e.sink().Capabilities().DateTime64
	for _, c := range cols {
		pgExpr, chExpr := c.pgModern, c.chModern
		if !modern {
			chExpr = c.chLegacy
			if c.pgLegacy != "" {
				pgExpr = c.pgLegacy
			}
		}
		pg := e.pgStrings("SELECT id::text, coalesce(" + strings.ReplaceAll(pgExpr, "%s", c.name) + `, '\N') FROM ` + table + " ORDER BY " + table + ".id")
		ch := e.chStrings("SELECT toString(id), ifNull(" + strings.ReplaceAll(chExpr, "%s", "`"+c.name+"`") + `, '\\N') FROM ` +
			e.table(table) + " FINAL WHERE _ferry_deleted = 0 ORDER BY id")
		sameRows(t, "column "+c.name, ch, pg)
	}
	e.verifyAll(cfg) // reads ClickHouse's values back through the driver
}

// Renderings of the other modern types. toString of a Decimal drops
// trailing zeros on 26.7, as trim_scale does, and keeps them on 18.16,
// which holds numeric wider than 38 digits as PostgreSQL's text. A text element is quoted so that NULL
// and the text "NULL" differ.
const (
	pgTrimmed = "trim_scale(%s)::text"
	pgQuoted  = "'''' || %s || ''''"
	chQuoted  = "concat('''', %s, '''')"
	pgBool    = "CASE WHEN %s THEN 'true' WHEN NOT %s THEN 'false' END"
)

var modernColumns = []rangeColumn{
	{name: "n76", pgType: "numeric(76,20)", pgModern: pgTrimmed, pgLegacy: "%s::text", chModern: "toString(%s)", chLegacy: "%s"},
	{name: "n760", pgType: "numeric(76,0)", pgModern: "%s::text", chModern: "toString(%s)", chLegacy: "%s"},
	{name: "n39", pgType: "numeric(39,39)", pgModern: pgTrimmed, pgLegacy: "%s::text", chModern: "toString(%s)", chLegacy: "%s"},
	{name: "n3838", pgType: "numeric(38,38)", pgModern: pgTrimmed, pgLegacy: "%s::text", chModern: "toString(%s)", chLegacy: "toString(%s)"},
	{name: "u", pgType: "uuid", pgModern: "%s::text", chModern: "toString(%s)", chLegacy: "toString(%s)"},
	{name: "b", pgType: "boolean", pgModern: pgBool, pgLegacy: "%s::int::text", chModern: "toString(%s)", chLegacy: "toString(%s)"},
	{name: "e", pgType: "mood", pgModern: "%s::text", chModern: "%s", chLegacy: "%s"},
	{name: "ai", pgType: "int[] NOT NULL", pgModern: pgArray("%s::text"), chModern: chArray("toString(%s)"), chLegacy: chArray("toString(%s)")},
	{name: "at", pgType: "text[] NOT NULL", pgModern: pgArray(pgQuoted), chModern: chArray(chQuoted), chLegacy: chArray(chQuoted)},
	{name: "ae", pgType: "mood[] NOT NULL", pgModern: pgArray(pgQuoted), chModern: chArray(chQuoted), chLegacy: chArray(chQuoted)},
	{name: "au", pgType: "uuid[] NOT NULL", pgModern: pgArray("%s::text"), chModern: chArray("toString(%s)"), chLegacy: chArray("toString(%s)")},
	{name: "ab", pgType: "boolean[] NOT NULL", pgModern: pgArray(pgBool), pgLegacy: pgArray("%s::int::text"),
		chModern: chArray("toString(%s)"), chLegacy: chArray("toString(%s)")},
	{name: "an", pgType: "numeric(40,2)[] NOT NULL", pgModern: pgArray(pgTrimmed), pgLegacy: pgArray("%s::text"),
		chModern: chArray("toString(%s)"), chLegacy: chArray("%s")},
	// Arrays of domains map through the domain's base type.
	{name: "adom", pgType: "positive[] NOT NULL", pgModern: pgArray("%s::text"), chModern: chArray("toString(%s)"), chLegacy: chArray("toString(%s)")},
	{name: "adec", pgType: "money2[] NOT NULL", pgModern: pgArray(pgTrimmed), pgLegacy: pgArray("%s::text"), chModern: chArray("toString(%s)"), chLegacy: chArray("toString(%s)")},
	// One value past 2262 sends the whole batch through the external
	// table (loader/clickhouse/rawtime.go), so every type above takes that
	// path too, in the copy and in the stream.
	{name: "ts", pgType: "timestamp", pgModern: pgMicroText, pgLegacy: pgMicros, chModern: "toString(%s)", chLegacy: "toString(%s)"},
}

var modernRows = []string{
	`'` + strings.Repeat("9", 56) + `.` + strings.Repeat("9", 20) + `', '` + strings.Repeat("9", 76) + `', '0.` + strings.Repeat("9", 39) + `',
	 '0.` + strings.Repeat("9", 38) + `', 'ffffffff-ffff-ffff-ffff-ffffffffffff', true, 'happy',
	 '{2147483647,NULL,-2147483648}', '{NULL,"NULL","","it''s ✓"}', '{happy,NULL,"it''s ✓"}',
	 '{00000000-0000-0000-0000-000000000000,NULL}', '{true,NULL,false}', '{99999999999999999999999999999999999999.99,NULL}', '{1,NULL,2147483647}', '{1.50,NULL,-99999999.99}',
	 '2270-06-01 12:00:00'`,
	`'-` + strings.Repeat("9", 56) + `.` + strings.Repeat("9", 20) + `', '-` + strings.Repeat("9", 76) + `', '-0.` + strings.Repeat("0", 38) + `1',
	 '-0.` + strings.Repeat("9", 38) + `', '00000000-0000-0000-0000-000000000000', false, 'it''s ✓',
	 '{}', '{}', '{}', '{}', '{}', '{-0.01}', '{}', '{}', '2024-02-29 12:34:56.789012'`,
	`0.00000000000000000001, 0, 0, 0, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', NULL, NULL,
	 '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', NULL`,
	`NULL, NULL, NULL, NULL, NULL, NULL, 'sad', '{0}', '{""}', '{sad}', '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', '{false}', '{0}', '{1}', '{0.00}', NULL`,
}

// TestModernTypesRange sends the extremes of Decimal up to 76 digits,
// UUID, Bool, enums and arrays with NULLs (of domains too) through the
// copy, the stream and unchanged lookups, and compares each server's
// rendering with PostgreSQL's.
func TestModernTypesRange(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TYPE mood AS ENUM ('sad', 'happy', 'it''s ✓')`, `CREATE DOMAIN positive AS int CHECK (VALUE > 0)`,
		`CREATE DOMAIN money2 AS numeric(10,2)`)
	checkRange(t, e, "modern", modernColumns, modernRows)
}

// TestOutOfRangeStops sends timestamps and dates outside DateTime64's and
// Date32's range through the copy and the stream: on 26.7 ferry stops with
// an error naming the table, the column, the row's key and the fix, and
// ClickHouse keeps no altered row; 18.16's integer forms hold them exactly.
func TestOutOfRangeStops(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE oor (id int PRIMARY KEY, ts timestamp, d date)`,
		`INSERT INTO oor VALUES (1, '2024-01-01 00:00:00', '2024-01-01'), (2, '2300-01-01 00:00:00', NULL)`)
	cfg := e.config()
	modern := e.sink().Capabilities().DateTime64
	stops := func(step, col, key string) {
		t.Helper()
		err := e.catchUp(cfg)
		if !modern {
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			return
		}
		for _, want := range []string{"public.oor", `"` + col + `"`, `row (id="` + key + `")`, "--text-columns public.oor." + col} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: error %v, want one with %s", step, err, want)
			}
		}
		if n := e.chStrings("SELECT toString(count()) FROM " + e.table("oor") + " WHERE id = " + key); n[0][0] != "0" {
			t.Errorf("%s: ClickHouse holds %s rows of id %s", step, n[0][0], key)
		}
	}
	stops("copy", "ts", "2")
	e.exec(`UPDATE oor SET ts = '2299-12-31 23:59:59.999999' WHERE id = 2`)
	e.mustCatchUp(cfg)
	e.exec(`INSERT INTO oor VALUES (3, NULL, '1899-12-31')`)
	stops("stream", "d", "3") // and again at every restart: the change is not confirmed
	stops("restart", "d", "3")
	if !modern {
		sameRows(t, "oor", e.chStrings("SELECT toString(id), ifNull(toString(ts), '\\\\N'), ifNull(toString(d), '\\\\N') FROM "+e.table("oor")+" FINAL WHERE _ferry_deleted = 0 ORDER BY id"),
			e.pgStrings(`SELECT id::text, coalesce(`+strings.ReplaceAll(pgMicros, "%s", "ts")+`, '\N'), coalesce(`+strings.ReplaceAll(pgDays, "%s", "d")+`, '\N') FROM oor ORDER BY oor.id`))
	}
}
