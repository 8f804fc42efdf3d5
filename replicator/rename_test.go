package replicator_test

import (
	"context"
	"testing"

	"github.com/ferry-cdc/ferry/replicator"
)

// TestRenameReceivedAgain: ferry stopped after it renamed a ClickHouse
// table for a rename in PostgreSQL and before it stored the state that
// says so (TestSchemaChangesWhileWriting met it, stopped in the rebuild
// that followed the rename). The next start copies the table afresh
// under its old name and receives the rename again: the renamed table of
// the first try must not stop it for good ("already exists"), and is kept
// aside rather than dropped.
func TestRenameReceivedAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`, `INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 100) g`)
	if err := replicator.Setup(ctx, e.adminURL, "ferry"); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	e.mustCatchUp(cfg)
	e.exec(`ALTER TABLE items RENAME TO things`, `INSERT INTO things VALUES (101, 'after')`, `UPDATE things SET v = 'changed' WHERE id <= 10`)
	// What the stopped ferry had done of it.
	if err := e.ch.Exec(ctx, "RENAME TABLE "+e.table("items")+" TO "+e.table("things")); err != nil {
		t.Fatal(err)
	}
	e.mustCatchUp(cfg)
	if counts := e.verifyAll(cfg); counts["public.things"] != 101 {
		t.Errorf("verified %v, want public.things 101 rows", counts)
	}
	aside := e.chStrings("SELECT name FROM system.tables WHERE database = '" + e.db + "' AND startsWith(name, 'things__ferry_aside_')")
	if len(aside) != 1 {
		t.Errorf("tables set aside: %v, want the first try's things", aside)
	}
}
