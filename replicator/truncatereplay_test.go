package replicator_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/replicator"
)

// TestReplayAcrossTruncate receives again, as after a restart whose
// confirmed position lagged, a transaction that ferry wrote before a
// TRUNCATE it also applied. The transaction moved a row to another key and
// left its TOASTed column unchanged, a value to come from ClickHouse,
// which the truncation has emptied since: ferry stopped on it at every
// start ("no value for unchanged (TOASTed) column"), found by ferry torture
// seed 981398 round 9 after a PostgreSQL restart. A replay must get past
// it to PostgreSQL's end state.
func TestReplayAcrossTruncate(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	e.exec(`CREATE TABLE docs (id int PRIMARY KEY, body text)`,
		`ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL`,
		`INSERT INTO docs VALUES (1, repeat('x', 10000)), (5, repeat('y', 10000))`)
	e.mustCatchUp(cfg)
	keep := e.slot + "_keep"
	e.slotExec(`SELECT pg_copy_logical_replication_slot($1, $2)`, e.slot, keep)
	t.Cleanup(func() { e.dropSlot(keep) })
	e.exec(`UPDATE docs SET id = 2 WHERE id = 1`,
		`UPDATE docs SET id = 6 WHERE id = 5`,
		`BEGIN`, `TRUNCATE docs`, `INSERT INTO docs VALUES (3, 'in the truncating transaction')`, `COMMIT`,
		`INSERT INTO docs VALUES (4, repeat('z', 10000))`,
		`UPDATE docs SET id = 7 WHERE id = 4`)
	e.mustCatchUp(cfg)
	// The slot back at the position before the key changes.
	e.dropSlot(e.slot)
	e.slotExec(`SELECT pg_copy_logical_replication_slot($1, $2)`, keep, e.slot)
	if err := e.catchUp(cfg); err != nil {
		t.Fatalf("catch up again from before the TRUNCATE: %v", err)
	}
	if n := e.verifyAll(cfg)["public.docs"]; n != 2 {
		t.Errorf("docs: %d rows, want 2 (3 and 7)", n)
	}
	sameRows(t, "docs", e.chStrings("SELECT toString(id), toString(length(body)) FROM "+e.table("docs")+" FINAL WHERE _ferry_deleted = 0 ORDER BY id"),
		[][]string{{"3", "29"}, {"7", "10000"}})
}

// slotExec runs a statement in the test database as the superuser (a
// copied slot belongs to the database it is copied in).
func (e *env) slotExec(sql string, args ...any) {
	e.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// dropSlot drops a slot once the walsender that held it is gone.
func (e *env) dropSlot(name string) {
	e.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.base)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(ctx)
	for i := 0; ; i++ {
		_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, name)
		if err == nil || i == 100 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		e.t.Fatalf("drop slot %s: %v", name, err)
	}
}

// TestReplayBeforeAddColumn receives again, as after a PostgreSQL restart
// that lost the slot's confirmed position (before version 17 a shutdown
// does not save it), changes from before a column was added. The stored
// state has the column; the replayed stream's first change describes the
// table without it, and ferry dropped the column in ClickHouse, then added
// it again when the stream reached the ADD COLUMN: the rows a copy holds,
// whose changes the stream leaves out, kept NULL there. (Found by ferry
// torture seed 883963 round 5 on 18.16: two stored rows of one version, one
// NULL in the re-added column.)
func TestReplayBeforeAddColumn(t *testing.T) {
	e := newEnv(t)
	if err := replicator.Setup(context.Background(), e.adminURL, "ferry"); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, a text)`, `INSERT INTO items SELECT g, 'x' FROM generate_series(1, 10) g`)
	e.mustCatchUp(cfg)
	keep := e.slot + "_keep"
	e.slotExec(`SELECT pg_copy_logical_replication_slot($1, $2)`, e.slot, keep)
	t.Cleanup(func() { e.dropSlot(keep) })
	e.exec(`INSERT INTO items VALUES (100, 'before the column')`,
		`ALTER TABLE items ADD COLUMN b int`, `UPDATE items SET b = id`)
	e.mustCatchUp(cfg)
	// A copy that holds the updates: ClickHouse lost the table.
	if err := e.ch.Exec(context.Background(), "DROP TABLE "+e.table("items")); err != nil {
		t.Fatal(err)
	}
	e.mustCatchUp(cfg)
	e.dropSlot(e.slot)
	e.slotExec(`SELECT pg_copy_logical_replication_slot($1, $2)`, keep, e.slot)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.items"]; n != 11 {
		t.Errorf("items: %d rows, want 11", n)
	}
	sameRows(t, "items", e.chStrings("SELECT toString(count()), toString(countIf(b = id)) FROM "+e.table("items")+" FINAL WHERE _ferry_deleted = 0"),
		[][]string{{"11", "11"}})
}
