package main

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCurrentViewsFlag: ferry run --current-views (and FERRY_CURRENT_VIEWS)
// creates <t>_current with the live rows, and ferry verify, which lists the
// replicated tables, is not misled by the view beside them; ferry teardown
// --drop-clickhouse drops it.
func TestCurrentViewsFlag(t *testing.T) {
	e := newOpsEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY, v text)`, `INSERT INTO t SELECT g, 'v' FROM generate_series(1, 30) g`,
		`DELETE FROM t WHERE id > 20`)
	if out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "", "--current-views")...); err != nil {
		t.Fatalf("ferry run: %v\n%s", err, tail(out))
	}
	e.exec(`DELETE FROM t WHERE id > 10`, `UPDATE t SET v = 'w' WHERE id = 1`)
	if out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "", "--current-views")...); err != nil {
		t.Fatalf("ferry run: %v\n%s", err, tail(out))
	}
	if tables := e.chTables(e.name); !slices.Contains(tables, "t_current (10 rows)") {
		t.Errorf("ClickHouse tables %v, want t_current (10 rows) among them", tables)
	}
	if out, err := e.ferry(e.args("verify")...); err != nil {
		t.Errorf("ferry verify: %v\n%s", err, tail(out))
	}
	// The environment variable does the same.
	if err := e.chExec("DROP TABLE " + e.name + ".t_current"); err != nil {
		t.Fatal(err)
	}
	e.exec(`DELETE FROM t WHERE id > 5`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, e.args("run", "--catch-up", "--metrics-addr", "")...)
	cmd.Env = append(cleanEnv(), "FERRY_CURRENT_VIEWS=true")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ferry run: %v\n%s", err, tail(string(out)))
	}
	if tables := e.chTables(e.name); !slices.Contains(tables, "t_current (5 rows)") {
		t.Errorf("ClickHouse tables %v, want t_current (5 rows) among them", tables)
	}
	// ferry teardown --drop-clickhouse drops the view with its table.
	out, err := e.ferry(e.args("teardown", "--yes", "--drop-clickhouse")...)
	if err != nil || !strings.Contains(out, "drop ClickHouse table "+e.name+".t_current") {
		t.Fatalf("ferry teardown: %v\n%s", err, tail(out))
	}
	if tables := e.chTables(e.name); len(tables) != 0 {
		t.Errorf("after teardown, ClickHouse tables %v, want none", tables)
	}
}
