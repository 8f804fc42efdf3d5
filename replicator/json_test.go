package replicator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	chgo "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
	"github.com/ferry-cdc/ferry/verify"
)

// jsonEnv is an env on a ClickHouse with the JSON type; the test skips
// elsewhere (TestNativeJSONRefusedOnOldServer covers those).
func jsonEnv(t *testing.T) *env {
	e := newEnv(t)
	if !e.sink().Capabilities().JSON {
		t.Skip("the ClickHouse of FERRY_CH_URL has no JSON type (older than 25.3)")
	}
	return e
}

// verifyResult runs ferry's verify over one table and returns its result,
// whether it matches or not.
func (e *env) verifyResult(cfg replicator.Config, table string) verify.Result {
	e.t.Helper()
	s := e.sink()
	ctx := context.Background()
	tms, err := replicator.Tables(ctx, cfg, s.Capabilities())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, tm := range tms {
		if tm.Source.Name != table {
			continue
		}
		res, err := verify.Table(ctx, tm, func(ctx context.Context, tm *schema.TableMap, fn func([]any) error) error {
			return replicator.ScanTable(ctx, e.pgURL, tm, fn)
		}, s.ScanLiveColumns, verify.Config{})
		if err != nil {
			e.t.Fatal(err)
		}
		return res
	}
	e.t.Fatalf("no table %s", table)
	return verify.Result{}
}

// sameJSON asserts that ClickHouse's JSON text of each column of each row
// (as toJSONString gives it) is PostgreSQL's value of it, as JSON values.
func sameJSON(t *testing.T, what string, ch, pg [][]string) {
	t.Helper()
	if len(ch) != len(pg) {
		t.Fatalf("%s: ClickHouse has %d rows, PostgreSQL %d:\n%v\n%v", what, len(ch), len(pg), ch, pg)
	}
	for i := range pg {
		for j := range pg[i] {
			c, p := ch[i][j], pg[i][j]
			if p != `\N` {
				c, p = schema.CanonicalJSON(c), schema.CanonicalJSON(p)
			}
			if c != p {
				t.Errorf("%s: row %d column %d: ClickHouse %.200s, PostgreSQL %.200s", what, i, j, ch[i][j], pg[i][j])
			}
		}
	}
}

// TestNativeJSON: with --json-type=json, json and jsonb columns are
// ClickHouse JSON (Nullable where PostgreSQL allows NULL; arrays and key
// columns stay String), and every value arrives as the same JSON value
// through the initial copy, inserts, updates (one that leaves a TOASTed
// jsonb unchanged), deletes and a column added later; ferry verify agrees,
// and finds a value changed in ClickHouse. Switching back to string copies
// the table afresh as String, as switching to json did as JSON.
func TestNativeJSON(t *testing.T) {
	e := jsonEnv(t)
	e.exec(`CREATE TABLE j (id int PRIMARY KEY, jb jsonb, js json, nn jsonb NOT NULL DEFAULT '{}', arr jsonb[] NOT NULL DEFAULT '{}', big jsonb, n int)`,
		`ALTER TABLE j ALTER COLUMN big SET STORAGE EXTERNAL`,
		`INSERT INTO j (id, jb, js, nn, arr, big, n) VALUES
			(1, '{"b": 1, "a": [1, "x", [2.5, 3]], "c": {"d": "2024-1-1"}}', '{"z": 1.0, "a": 12345678901234567890}', '{"k": "é\u00e9"}',
			 ARRAY['{"a": null}', '1']::jsonb[], jsonb_build_object('big', repeat('x', 6000), 'n', 1, 'huge', 1e20, 'f', 1.5), 1),
			(2, NULL, NULL, '{}', '{}', NULL, 2),
			(3, '{"deep": {"er": {"est": [true, false, "s"]}}}', '{"a": 1e2, "b": -0.0}', '{"x": ""}', '{}', '{"a": 1}', 3)`)
	cfg := e.config()
	e.mustCatchUp(cfg) // --json-type=string first: the switch copies afresh
	if got := e.chStrings(`SELECT type FROM system.columns WHERE database = '` + e.db + `' AND table = 'j' AND name = 'jb'`); got[0][0] != "Nullable(String)" {
		t.Fatalf("jb is %s with --json-type=string, want Nullable(String)", got[0][0])
	}
	cfg.NativeJSON = true
	e.mustCatchUp(cfg)
	types := map[string]string{}
	for _, r := range e.chStrings(`SELECT name, type FROM system.columns WHERE database = '` + e.db + `' AND table = 'j'`) {
		types[r[0]] = r[1]
	}
	for col, want := range map[string]string{"id": "Int32", "jb": "Nullable(JSON)", "js": "Nullable(JSON)", "nn": "JSON", "arr": "Array(Nullable(String))", "big": "Nullable(JSON)"} {
		if types[col] != want {
			t.Errorf("column %s is %s, want %s", col, types[col], want)
		}
	}

	e.exec(`INSERT INTO j (id, jb, js, nn) VALUES (4, '{"u": "\ud83d\ude00", "n": [1, 2, 3]}', '{"dup": 1, "x": [{"y": 1}, {"y": "s"}]}', '{"i": -9223372036854775808}')`,
		`UPDATE j SET n = 10 WHERE id = 1`, // big is TOASTed and unchanged
		`UPDATE j SET jb = '{"now": "set"}', js = '{"a": 0.1}' WHERE id = 2`,
		`UPDATE j SET jb = NULL WHERE id = 3`,
		`ALTER TABLE j ADD COLUMN later jsonb`,
		`INSERT INTO j (id, later) VALUES (5, '{"later": [[1, 2], [3.5]]}')`,
		`UPDATE j SET later = '{"v": 2}' WHERE id = 4`,
		`DELETE FROM j WHERE id = 4`,
		`INSERT INTO j (id, later) VALUES (6, NULL)`)
	e.mustCatchUp(cfg)
	if got := e.chStrings(`SELECT type FROM system.columns WHERE database = '` + e.db + `' AND table = 'j' AND name = 'later'`); len(got) != 1 || got[0][0] != "Nullable(JSON)" {
		t.Errorf("the column added later is %v, want Nullable(JSON)", got)
	}
	pg := e.pgStrings(`SELECT id::text, jb::text, js::text, nn::text, big::text, later::text FROM j ORDER BY id`)
	ch := e.chStrings(`SELECT toString(id), ifNull(toJSONString(jb), '\\N'), ifNull(toJSONString(js), '\\N'), toJSONString(nn), ifNull(toJSONString(big), '\\N'), ifNull(toJSONString(later), '\\N')
		FROM ` + e.table("j") + ` FINAL WHERE _ferry_deleted = 0 ORDER BY id`)
	sameJSON(t, "after the stream", ch, pg)
	if got := e.chStrings(`SELECT toString(n), toString(length(big.big::String)) FROM ` + e.table("j") + ` FINAL WHERE id = 1`); len(got) != 1 || got[0][0] != "10" || got[0][1] != "6000" {
		t.Errorf("row 1 after an update that left big unchanged: %v, want n 10 and the 6000 bytes of big.big", got)
	}
	// A path is a subcolumn: the point of the JSON type.
	if got := e.chStrings(`SELECT toString(jb.c.d), dynamicType(js.a) FROM ` + e.table("j") + ` FINAL WHERE id = 1`); len(got) != 1 || got[0][0] != "2024-1-1" || got[0][1] != "UInt64" {
		t.Errorf("paths of row 1: %v, want the string 2024-1-1 (not a date) and UInt64", got)
	}
	if n := e.verifyAll(cfg)["public.j"]; n != 5 {
		t.Errorf("verify counted %d rows, want 5", n)
	}

	// A value changed in ClickHouse (a newer version of row 3 whose js
	// lost a digit) is a difference verify reports.
	cols := "id, jb, js, nn, arr, big, n, later"
	e.chExec(`INSERT INTO ` + e.table("j") + ` (` + cols + `, _ferry_version, _ferry_deleted)
		SELECT ` + strings.Replace(cols, "js,", `'{"a": 100, "b": 1}',`, 1) + `, _ferry_version + 1, 0 FROM ` + e.table("j") + ` FINAL WHERE id = 3`)
	res := e.verifyResult(cfg, "j")
	if res.Match || len(res.Differences) != 1 || !strings.Contains(res.Differences[0].String(), `id="3"`) {
		t.Errorf("verify after changing js of row 3 in ClickHouse: match %v, differences %v; want one, of id=3", res.Match, res.Differences)
	}
	e.chExec(`INSERT INTO ` + e.table("j") + ` (` + cols + `, _ferry_version, _ferry_deleted)
		SELECT ` + strings.Replace(cols, "js,", `'{"a": 100, "b": -0}',`, 1) + `, _ferry_version + 1, 0 FROM ` + e.table("j") + ` FINAL WHERE id = 3`)
	if res := e.verifyResult(cfg, "j"); !res.Match {
		t.Errorf("verify after writing js of row 3 again as the same JSON value: %v", res.Differences)
	}

	// Back to string: the next start finds the columns not the mapping's
	// and copies the table afresh, as String of the exact text.
	cfg.NativeJSON = false
	e.exec(`INSERT INTO j (id, js) VALUES (7, '{"b":1,  "a":2}')`)
	e.mustCatchUp(cfg)
	if got := e.chStrings(`SELECT type FROM system.columns WHERE database = '` + e.db + `' AND table = 'j' AND name = 'js'`); got[0][0] != "Nullable(String)" {
		t.Errorf("after --json-type=string js is %s, want Nullable(String)", got[0][0])
	}
	if got := e.chStrings(`SELECT js FROM ` + e.table("j") + ` FINAL WHERE id = 7`); len(got) != 1 || got[0][0] != `{"b":1,  "a":2}` {
		t.Errorf("json text after switching to string: %v, want the text verbatim", got)
	}
	if n := e.verifyAll(cfg)["public.j"]; n != 6 {
		t.Errorf("verify after switching to string counted %d rows, want 6", n)
	}
}

// chExec runs a ClickHouse statement.
func (e *env) chExec(q string) {
	e.t.Helper()
	if err := e.ch.Exec(context.Background(), q); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

// TestNativeJSONStopsOnAlteredValue: a value the JSON type would store
// altered stops ferry, naming the table, the column and the fix, in the
// initial copy and in the stream; nothing of it reaches ClickHouse and the
// slot is not confirmed past it, so that the fix (--text-columns for the
// column) replicates it exactly.
func TestNativeJSONStopsOnAlteredValue(t *testing.T) {
	e := jsonEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v jsonb)`, `INSERT INTO a VALUES (1, '{"ok": 1}'), (2, '{"gone": null}')`)
	cfg := e.config()
	cfg.NativeJSON = true
	err := e.catchUp(cfg)
	for _, want := range []string{"public.a", `"v"`, "null", "--text-columns public.a.v", "--json-type=string"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("copy of a null member: %v; want an error naming %s", err, want)
		}
	}
	e.exec(`UPDATE a SET v = '{"kept": 0}' WHERE id = 2`)
	e.mustCatchUp(cfg)
	e.exec(`INSERT INTO a VALUES (3, '{"n": 3}')`, `INSERT INTO a VALUES (4, '{"x": 3.14159265358979323846264338}')`, `INSERT INTO a VALUES (5, '{"y": 5}')`)
	err = e.catchUp(cfg)
	if err == nil || !strings.Contains(err.Error(), `"v"`) || !strings.Contains(err.Error(), "Float64") || !strings.Contains(err.Error(), "--text-columns public.a.v") {
		t.Fatalf("stream of a number Float64 can't hold: %v; want an error naming the column, the cause and the fix", err)
	}
	if got := e.chStrings(`SELECT toString(count()) FROM ` + e.table("a") + ` WHERE id >= 4`); got[0][0] != "0" {
		t.Errorf("ClickHouse holds %s rows of id 4 or more after the refusal, want none", got[0][0])
	}
	cfg.TextColumns = []string{"public.a.v"}
	e.mustCatchUp(cfg)
	if got := e.chStrings(`SELECT v FROM ` + e.table("a") + ` FINAL WHERE id = 4`); len(got) != 1 || got[0][0] != `{"x": 3.14159265358979323846264338}` {
		t.Errorf("row 4 with --text-columns: %v, want jsonb's exact text", got)
	}
	if n := e.verifyAll(cfg)["public.a"]; n != 5 {
		t.Errorf("verify counted %d rows, want 5", n)
	}
}

// TestNativeJSONRefusedOnOldServer: --json-type=json on a ClickHouse
// without the JSON type (18.16) is refused before anything starts.
func TestNativeJSONRefusedOnOldServer(t *testing.T) {
	e := newEnv(t)
	s := e.sink()
	if s.Capabilities().JSON {
		t.Skip("the ClickHouse of FERRY_CH_URL has the JSON type: the refusal is for older servers")
	}
	e.exec(`CREATE TABLE o (id int PRIMARY KEY, v jsonb)`)
	cfg := e.config()
	cfg.NativeJSON = true
	err := e.catchUp(cfg)
	if err == nil || !strings.Contains(err.Error(), "--json-type=json") || !strings.Contains(err.Error(), "25.3") || !strings.Contains(err.Error(), "--json-type=string") {
		t.Fatalf("catch-up with NativeJSON on %s: %v; want a refusal naming the flag, 25.3 and the fix", s.ServerVersion(), err)
	}
	err = replicator.CheckJSONType(true, s.Capabilities(), "ClickHouse "+s.ServerVersion())
	if err == nil || !strings.Contains(err.Error(), s.ServerVersion()) {
		t.Errorf("CheckJSONType: %v, want the server's version %s", err, s.ServerVersion())
	}
	if got := e.chStrings(fmt.Sprintf(`SELECT toString(count()) FROM system.tables WHERE database = '%s' AND name = 'o'`, e.db)); got[0][0] != "0" {
		t.Errorf("the refused start made the table")
	}
}

// jsonExact are values ClickHouse's JSON type must give back as the same
// JSON value, and jsonAltered values it gives back altered or refuses,
// which ferry must therefore refuse (schema.CheckJSON).
var (
	jsonExact = []string{
		`{}`,
		`{"b":1,"a":2}`,
		`{"a":12345678901234567890,"b":-9223372036854775808,"c":18446744073709551615}`,
		`{"a":1.0,"b":1e2,"c":1E+2,"d":0.1,"e":-0.0,"f":-0,"g":5e-324,"h":1.7976931348623157e308}`,
		`{"a":0.30000000000000004,"b":1.5e300,"c":123456789.125}`,
		`{"a":[],"b":[[]],"c":[{}],"d":[null],"e":[null,1]}`,
		`{"a":[1,"x",null,[2,{"b":3}]]}`,
		`{"a":[9223372036854775807,"s"],"b":[12345678901234567890,"s",-1],"c":{"d":12345678901234567890}}`,
		`{"a":[1,2.5],"b":[[1,2],[3.5]],"c":[1,1e20]}`,
		`{"a":[9007199254740992,1],"b":[-9007199254740992,-1],"c":[{"x":12345678901234567890},{"x":-1}],"d":[1000000000000000000000,0.5]}`,
		`{"a":[18014398509481984,-1,1e20]}`,
		`{"a":[9007199254740993,"s",0.5],"b":[true,"s",1],"c":[1,[true]]}`,
		`{"a":[{"x":9007199254740993},{"x":0.5}],"b":[{"x":true},{"x":1}]}`,
		`{"a":"\u00e9\u0000\ud83d\ude00","b":"x\"y\\z\n\t/","c":"é"}`,
		`{"a":"2024-1-1","b":"2024-01-01T00:00:00Z","c":"123","d":"true","e":"00123","f":"1e5","g":"nan","h":"2024-01-01 00:00:00"}`,
		`{"":1,"a b":{"c":[true,false]},"ключ":"значение"}`,
		` { "spaced" : [ 1 , 2 ] } `,
		`{"a":{"b":1},"c":{"b":"s"}}`,
		strings.Repeat(`{"a":`, 999) + `1` + strings.Repeat(`}`, 999),
		manyPaths(3000),
	}
	jsonAltered = []string{
		`{"a":null}`,
		`{"a":{"b":{"c":null}}}`,
		`{"a":[{"b":null}]}`,
		`{"a":{}}`,
		`{"a":[{"b":{}}]}`,
		`{"a":1,"a":2}`,
		`{"a.b":1}`,
		`{"a":[{"b.c":1}]}`,
		`{"a":123456789012345678901234567890}`,
		`{"a":-9223372036854775809}`,
		`{"a":1e400}`,
		`{"a":1e-400}`,
		`{"a":3.141592653589793238462643383279}`,
		`{"a":9007199254740993.0}`,
		`{"a":[true,1]}`,
		`{"a":[[true],[1]]}`,
		`{"a":[9007199254740993,0.5]}`,
		`{"a":[[9007199254740993],[0.5]]}`,
		`{"a":[1152921504606846976,0.5]}`,
		`{"a":[12345678901234567890,-1]}`,
		`{"a":[9007199254740993]}`,
		`{"a":[{"x":[9007199254740993]}]}`,
		`{"a":18446744073709551616}`,
		`{"a":"\ud800"}`,
		`1`,
		`[1,2]`,
		`"s"`,
		`null`,
		strings.Repeat(`{"a":`, 2000) + `1` + strings.Repeat(`}`, 2000),
	}
)

// jsonAlteredAfter are the values of jsonAltered that ClickHouse alters
// only after another row of the same INSERT: the row it needs first.
var jsonAlteredAfter = map[string]string{
	`{"a":[12345678901234567890,-1]}`:  `{"a":[0.5]}`,
	`{"a":[9007199254740993]}`:         `{"a":[0.5]}`,
	`{"a":[{"x":[9007199254740993]}]}`: `{"a":[{"x":[0.5]}]}`,
}

// manyPaths is an object of n members, more paths than a JSON column keeps
// as subcolumns (max_dynamic_paths, 1024): the rest go to its shared data.
func manyPaths(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i*7)
	}
	return b.String() + "}"
}

// TestNativeJSONCorpus checks CheckJSON's claims against the server: every
// value it accepts comes back from ClickHouse as the same JSON value through
// ferry (a json column keeps each text verbatim; jsonb its normal form), and
// every value it refuses is one ClickHouse alters or refuses when written
// directly, so no refusal is needless on this server.
func TestNativeJSONCorpus(t *testing.T) {
	e := jsonEnv(t)
	e.exec(`CREATE TABLE c (id int PRIMARY KEY, js json, jb jsonb)`)
	for i, v := range jsonExact {
		if err := schema.CheckJSON([]byte(v)); err != nil {
			t.Fatalf("CheckJSON refuses %.80s: %v", v, err)
		}
		e.exec(fmt.Sprintf(`INSERT INTO c (id, js) VALUES (%d, %s)`, i, pgLiteral(v)),
			fmt.Sprintf(`DO $$ BEGIN UPDATE c SET jb = js::jsonb WHERE id = %d; EXCEPTION WHEN others THEN NULL; END $$`, i))
	}
	cfg := e.config()
	cfg.NativeJSON = true
	e.mustCatchUp(cfg)
	pg := e.pgStrings(`SELECT js::text, coalesce(jb::text, '\N') FROM c ORDER BY id`)
	ch := e.chStrings(`SELECT toJSONString(js), ifNull(toJSONString(jb), '\\N') FROM ` + e.table("c") + ` FINAL ORDER BY id`)
	sameJSON(t, "corpus", ch, pg)
	if n := e.verifyAll(cfg)["public.c"]; n != uint64(len(jsonExact)) {
		t.Errorf("verify counted %d rows, want %d", n, len(jsonExact))
	}

	ctx := ch2ctx()
	e.chExec(`CREATE TABLE ` + e.table("direct") + ` (id UInt32, j JSON) ENGINE = MergeTree ORDER BY id`)
	for i, v := range jsonAltered {
		if err := schema.CheckJSON([]byte(v)); err == nil {
			t.Errorf("CheckJSON accepts %.80s", v)
		}
		b, err := e.ch.PrepareBatch(ctx, `INSERT INTO `+e.table("direct")+` (id, j)`)
		if err != nil {
			t.Fatal(err)
		}
		if before, ok := jsonAlteredAfter[v]; ok {
			if err := b.Append(uint32(1000+i), before); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Append(uint32(i), v); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(); err != nil {
			continue // refused by ClickHouse: ferry's refusal names the column instead
		}
		got := e.chStrings(fmt.Sprintf(`SELECT toJSONString(j) FROM %s WHERE id = %d`, e.table("direct"), i))
		if len(got) == 1 && schema.CanonicalJSON(got[0][0]) == schema.CanonicalJSON(v) {
			t.Errorf("ClickHouse stores %.80s exactly, yet CheckJSON refuses it", v)
		}
	}
}

// ch2ctx is a context with the settings of ferry's JSON inserts.
func ch2ctx() context.Context {
	return chgo.Context(context.Background(), chgo.WithSettings(chgo.Settings{
		"input_format_try_infer_dates": 0, "input_format_try_infer_datetimes": 0}))
}

// pgLiteral quotes s as a PostgreSQL string literal.
func pgLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// TestNativeJSONBeyondDriver: a batch that holds a timestamp past 2262 is
// written by INSERT ... SELECT from an external table (rawtime.go), where a
// JSON value travels as String; it arrives as the same value there too, a
// date-like string included.
func TestNativeJSONBeyondDriver(t *testing.T) {
	e := jsonEnv(t)
	e.exec(`CREATE TABLE x (id int PRIMARY KEY, ts timestamptz, v jsonb)`,
		`INSERT INTO x VALUES (1, '2270-06-01 12:00:00+00', '{"d": "2024-1-1", "n": 100000000000000000000, "a": [1, 2.5]}'), (2, now(), NULL)`)
	cfg := e.config()
	cfg.NativeJSON = true
	e.mustCatchUp(cfg)
	e.exec(`INSERT INTO x VALUES (3, '2280-01-01 00:00:00+00', '{"d": "2024-2-2"}')`)
	e.mustCatchUp(cfg)
	pg := e.pgStrings(`SELECT coalesce(v::text, '\N') FROM x ORDER BY id`)
	ch := e.chStrings(`SELECT ifNull(toJSONString(v), '\\N') FROM ` + e.table("x") + ` FINAL ORDER BY id`)
	sameJSON(t, "beyond the driver", ch, pg)
	if n := e.verifyAll(cfg)["public.x"]; n != 3 {
		t.Errorf("verify counted %d rows, want 3", n)
	}
}
