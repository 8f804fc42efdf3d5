package replicator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

// catchUpWithViews runs ferry until caught up with --current-views on.
func (e *env) catchUpWithViews(cfg replicator.Config) {
	e.t.Helper()
	s, err := clickhouse.New(context.Background(), clickhouse.Config{DSN: e.chURL, Database: e.db, CurrentViews: true})
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close()
	if err := e.catchUpThrough(cfg, s); err != nil {
		e.t.Fatalf("catch up: %v", err)
	}
}

// viewColumns lists a view's columns in order, comma separated.
func (e *env) viewColumns(view string) string {
	e.t.Helper()
	rows := e.chStrings("DESCRIBE TABLE " + e.table(view)) // 18.16's system.columns has no position
	var names []string
	for _, r := range rows {
		names = append(names, r[0])
	}
	return strings.Join(names, ",")
}

// TestCurrentViews: with CurrentViews each table's <t>_current view shows
// PostgreSQL's rows and columns, without ferry's versions, deleted rows or
// own columns, also after a column is added (in place), renamed (in place
// where the server can, else by a rebuild) and added with a default (a
// rebuild, swapped in), and after the table is renamed.
func TestCurrentViews(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, n int NOT NULL)`,
		`INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(1, 50) g`,
		`CREATE TABLE events (id int NOT NULL, msg text NOT NULL)`,
		`INSERT INTO events SELECT g, 'e' || g FROM generate_series(1, 5) g`)
	if err := replicator.Setup(context.Background(), e.adminURL, "ferry"); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.AppendOnly = []string{"public.events"}
	e.catchUpWithViews(cfg)
	e.exec(`UPDATE items SET name = 'renamed ' || id, n = n * 10 WHERE id % 3 = 0`,
		`DELETE FROM items WHERE id % 7 = 0`, `INSERT INTO items VALUES (100, 'new', 100)`,
		`UPDATE items SET n = -1 WHERE id = 100`, `INSERT INTO events VALUES (6, 'late')`)
	e.catchUpWithViews(cfg)
	check := func(step, chCols, pgCols string) {
		t.Helper()
		sameRows(t, step+": items_current", e.chStrings("SELECT "+chCols+" FROM "+e.table("items_current")+" ORDER BY id"),
			e.pgStrings("SELECT "+pgCols+" FROM items ORDER BY id"))
	}
	check("after changes", "toString(id), name, toString(n)", "id, name, n")
	if got := e.viewColumns("items_current"); got != "id,name,n" {
		t.Errorf("items_current columns %q, want id,name,n", got)
	}
	sameRows(t, "events_current", e.chStrings("SELECT toString(id), msg FROM "+e.table("events_current")+" ORDER BY id"),
		e.pgStrings("SELECT id, msg FROM events ORDER BY id"))
	if got := e.viewColumns("events_current"); got != "id,msg" {
		t.Errorf("events_current columns %q, want id,msg", got)
	}

	e.exec(`ALTER TABLE items ADD COLUMN extra text`, `UPDATE items SET extra = 'x' || id WHERE id % 2 = 0`)
	e.catchUpWithViews(cfg)
	check("after ADD COLUMN", "toString(id), name, toString(n), ifNull(extra, 'NULL')", "id, name, n, coalesce(extra, 'NULL')")

	e.exec(`ALTER TABLE items RENAME COLUMN name TO title`, `UPDATE items SET title = 't' || id WHERE id < 5`)
	e.catchUpWithViews(cfg)
	check("after RENAME COLUMN", "toString(id), title, toString(n), ifNull(extra, 'NULL')", "id, title, n, coalesce(extra, 'NULL')")

	e.exec(`ALTER TABLE items ADD COLUMN d int NOT NULL DEFAULT 7`, `UPDATE items SET d = 8 WHERE id = 1`)
	e.catchUpWithViews(cfg)
	check("after ADD COLUMN with a default", "toString(id), title, toString(n), ifNull(extra, 'NULL'), toString(d)",
		"id, title, n, coalesce(extra, 'NULL'), d")
	if got := e.viewColumns("items_current"); got != "id,title,n,extra,d" {
		t.Errorf("items_current columns %q, want id,title,n,extra,d", got)
	}

	// A renamed table's view follows it.
	e.exec(`ALTER TABLE items RENAME TO goods`, `UPDATE goods SET n = 0 WHERE id = 2`)
	e.catchUpWithViews(cfg)
	sameRows(t, "goods_current", e.chStrings("SELECT toString(id), title, toString(n), ifNull(extra, 'NULL'), toString(d) FROM "+e.table("goods_current")+" ORDER BY id"),
		e.pgStrings("SELECT id, title, n, coalesce(extra, 'NULL'), d FROM goods ORDER BY id"))
	sameRows(t, "views left", e.chStrings("SELECT name FROM system.tables WHERE database = '"+e.db+"' AND engine = 'View' ORDER BY name"),
		[][]string{{"events_current"}, {"goods_current"}})
	e.verifyAll(cfg)
}
