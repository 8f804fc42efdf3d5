package replicator_test

import "testing"

// TestFullRowNullAndBackslashN: under REPLICA IDENTITY FULL without a key a
// row is identified by all its values, so NULL and the text \N must encode
// apart; deleting one of two such rows keeps the other. Copied and streamed
// rows alike.
func TestFullRowNullAndBackslashN(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE notes (a text, b int)`, `ALTER TABLE notes REPLICA IDENTITY FULL`,
		`INSERT INTO notes VALUES (NULL, 1), (E'\\N', 1)`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	count := func() string {
		return e.chStrings(`SELECT toString(count()) FROM ` + e.table("notes") + ` FINAL WHERE _ferry_deleted = 0`)[0][0]
	}
	if n := count(); n != "2" {
		t.Errorf("copied NULL and \\N: ClickHouse holds %s rows, PostgreSQL 2", n)
	}
	e.exec(`INSERT INTO notes VALUES (NULL, 2), (E'\\N', 2)`)
	e.mustCatchUp(cfg)
	if n := count(); n != "4" {
		t.Errorf("streamed NULL and \\N: ClickHouse holds %s rows, PostgreSQL 4", n)
	}
	e.exec(`DELETE FROM notes WHERE a IS NULL`)
	e.mustCatchUp(cfg)
	sameRows(t, "rows left after deleting the NULLs",
		e.chStrings(`SELECT a, toString(b) FROM `+e.table("notes")+` FINAL WHERE _ferry_deleted = 0 ORDER BY b`),
		e.pgStrings(`SELECT a, b FROM notes ORDER BY b`))
	e.exec(`UPDATE notes SET a = NULL WHERE b = 1`)
	e.mustCatchUp(cfg)
	e.verifyAll(cfg)
}
