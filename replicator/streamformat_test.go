package replicator_test

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// TestStreamBinaryThenText streams a table whose columns ferry all reads
// in binary form in pgoutput's binary format; after a column of a type
// ferry reads as text only (inet) is added, the stream starts again in
// text format from the confirmed position, and ClickHouse holds what
// PostgreSQL does at each step.
func TestStreamBinaryThenText(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id bigint PRIMARY KEY, amount numeric(10,2) NOT NULL, at timestamptz, day date, note text, u uuid)`,
		`INSERT INTO a VALUES (1, 1.50, '2024-02-29 13:14:15.123456+00', '2024-02-29', 'one', gen_random_uuid())`)
	logs, seen := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))
	restarts := 0
	formats := func() []any { // of the streams since the last call
		var f []any
		for _, entry := range seen.TakeAll() {
			switch {
			case entry.Message == "streaming":
				f = append(f, entry.ContextMap()["format"])
			case strings.Contains(entry.Message, "starting again in text format"):
				restarts++
			}
		}
		return f
	}
	rows := func(what string) {
		t.Helper()
		e.verifyAll(cfg)
		sameRows(t, what, e.chStrings("SELECT toString(id), ifNull(note, '') FROM "+e.table("a")+" FINAL WHERE _ferry_deleted = 0 ORDER BY id"),
			e.pgStrings("SELECT id, coalesce(note, '') FROM a ORDER BY id"))
	}
	e.mustCatchUp(cfg)
	if f := formats(); len(f) != 1 || f[0] != "binary" {
		t.Fatalf("the first stream's format: %v, want binary", f)
	}
	e.exec(`INSERT INTO a SELECT g, g * 1.25, '2000-01-01'::timestamptz + g * interval '1 day 1 second', '1900-01-01'::date + g, 'n' || g, gen_random_uuid()
		FROM generate_series(2, 300) g`,
		`UPDATE a SET amount = -amount, at = NULL, note = NULL WHERE id % 7 = 0`,
		`UPDATE a SET id = id + 1000 WHERE id % 11 = 0`,
		`DELETE FROM a WHERE id % 13 = 0`)
	e.mustCatchUp(cfg)
	if f := formats(); len(f) != 1 || f[0] != "binary" {
		t.Fatalf("the second stream's format: %v, want binary", f)
	}
	rows("after a stream in binary")

	// Added while ferry is stopped: the next run starts in binary from its
	// state, and meets the column in the stream.
	e.exec(`ALTER TABLE a ADD COLUMN addr inet`,
		`INSERT INTO a (id, amount, addr, note) SELECT g, g, ('10.0.' || g % 256 || '.1')::inet, 'm' || g FROM generate_series(2001, 2100) g`,
		`UPDATE a SET addr = '::1' WHERE id = 1`)
	e.mustCatchUp(cfg)
	if f := formats(); len(f) != 2 || f[0] != "binary" || f[1] != "text" {
		t.Fatalf("the streams' formats: %v, want binary then text", f)
	}
	if restarts != 1 {
		t.Errorf("%d warnings of the stream starting again in text, want 1", restarts)
	}
	rows("after the stream started again in text")
	sameRows(t, "addresses", e.chStrings("SELECT toString(id), addr FROM "+e.table("a")+" FINAL WHERE _ferry_deleted = 0 AND id IN (1, 2001, 2100) ORDER BY id"),
		[][]string{{"1", "::1"}, {"2001", "10.0.209.1"}, {"2100", "10.0.52.1"}})

	// From now on the table holds a column read as text: streams start so.
	e.exec(`INSERT INTO a (id, amount, addr) VALUES (3000, 3, '192.168.0.1/24')`)
	e.mustCatchUp(cfg)
	if f := formats(); len(f) != 1 || f[0] != "text" {
		t.Fatalf("the last stream's format: %v, want text", f)
	}
	rows("after a stream in text")

	// --stream-text asks for text whatever the tables hold.
	e.exec(`ALTER TABLE a DROP COLUMN addr`, `INSERT INTO a (id, amount) VALUES (3001, 4)`)
	cfg.StreamText = true
	e.mustCatchUp(cfg)
	if f := formats(); len(f) != 1 || f[0] != "text" {
		t.Fatalf("the format with StreamText: %v, want text", f)
	}
	rows("with StreamText")
}
