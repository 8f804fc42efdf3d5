package main

import (
	"strings"
	"testing"
)

// TestVerifyUnappliedColumn: a column added while ferry is stopped, or
// without ferry setup's DDL capture before the table's next row change,
// is in PostgreSQL but not yet in ClickHouse. verify stopped with
// ClickHouse's "Unknown identifier" error; it reports the table as
// differing, naming the column, checks the other tables, and passes once
// ferry has applied the change. A column dropped in PostgreSQL but still in
// ClickHouse is noted, and the other columns compared.
func TestVerifyUnappliedColumn(t *testing.T) {
	e := newOpsEnv(t)
	e.exec("CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, 'a'), (2, 'b')",
		"CREATE TABLE u (id int PRIMARY KEY)", "INSERT INTO u VALUES (1)")
	if out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "")...); err != nil {
		t.Fatalf("ferry run --catch-up: %v\n%s", err, out)
	}
	e.exec("ALTER TABLE t ADD COLUMN w int DEFAULT 5")
	out, err := e.ferry(e.args("verify")...)
	if err == nil || !strings.Contains(out, `DIFFERS  public.t: the ClickHouse table's columns are not the PostgreSQL table's: "w" is missing`) ||
		!strings.Contains(out, "ok       public.u: 1 rows") || strings.Contains(out, "Unknown") {
		t.Errorf("verify with w not yet in ClickHouse: err %v\n%s", err, out)
	}
	e.exec("UPDATE t SET v = 'c' WHERE id = 1") // the Relation message that carries the new column
	if out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "")...); err != nil {
		t.Fatalf("ferry run --catch-up: %v\n%s", err, out)
	}
	if out, err := e.ferry(e.args("verify")...); err != nil || !strings.Contains(out, "ok       public.t: 2 rows") {
		t.Errorf("verify after the change was applied: err %v\n%s", err, out)
	}
	// A dropped column ClickHouse still holds: the other columns compare.
	e.exec("ALTER TABLE t DROP COLUMN v")
	if out, err := e.ferry(e.args("verify")...); err != nil || !strings.Contains(out, "ok       public.t: 2 rows") ||
		!strings.Contains(out, `note     public.t: ClickHouse still has "v" (Nullable(String)) is not in the source table`) {
		t.Errorf("verify with v dropped in PostgreSQL only: err %v\n%s", err, out)
	}
}

// TestVerifyEqualRows: a table without a key whose rows are identified by
// all their columns (REPLICA IDENTITY FULL) holds two rows equal in every
// column, which ClickHouse keeps once: verify says so, and --repair, which
// could not change it, leaves it alone.
func TestVerifyEqualRows(t *testing.T) {
	e := newOpsEnv(t)
	e.exec("CREATE TABLE t (id int, v text)", "ALTER TABLE t REPLICA IDENTITY FULL", "INSERT INTO t VALUES (1, 'a'), (1, 'a'), (2, 'b')")
	if out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "")...); err != nil {
		t.Fatalf("ferry run --catch-up: %v\n%s", err, out)
	}
	out, err := e.ferry(e.args("verify", "--repair")...)
	if err == nil || !strings.Contains(out, "DIFFERS  public.t: 3 rows in PostgreSQL, 2 in ClickHouse") ||
		!strings.Contains(out, "rows equal in every column to another row, which ClickHouse keeps once") || strings.Contains(out, "afresh") {
		t.Errorf("verify --repair: err %v\n%s", err, out)
	}
}
