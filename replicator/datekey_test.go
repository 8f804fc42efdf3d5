package replicator_test

import (
	"strings"
	"testing"
)

// TestDateKeyUnchangedToast: an update that leaves a TOASTed column
// unchanged makes ferry look the value up by key in ClickHouse; a date in
// the key must be written as the key column's type there. (Found by ferry
// torture: on 26.7 ferry stopped with "Type mismatch in IN or VALUES
// section. Expected: Date32. Got: Decimal64" and did not resume.)
func TestDateKeyUnchangedToast(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE t (id int, d date, v int, body text, PRIMARY KEY (id, d))`,
		`ALTER TABLE t ALTER COLUMN body SET STORAGE EXTERNAL`,
		`INSERT INTO t VALUES (1, '2024-02-29', 1, '`+strings.Repeat("b", 6000)+`'), (2, '1900-01-01', 1, '`+strings.Repeat("c", 6000)+`')`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	e.exec(`UPDATE t SET v = 2`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.t"]; n != 2 {
		t.Errorf("t: %d rows, want 2", n)
	}
}
