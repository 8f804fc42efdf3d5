package replicator_test

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ferry-cdc/ferry/replicator"
)

// TestRowFilterAndColumnList replicates two filtered tables: orders, big
// enough to be copied in page ranges, without its secret column and only
// its rows of two regions (region is part of the key, as a filter of a
// table whose updates are published must be); and pay, REPLICA IDENTITY
// FULL, filtered on a plain column. Rows enter and leave the filters by
// UPDATE, which pgoutput sends as INSERT and DELETE. After the copy and
// after the stream, ClickHouse must hold exactly PostgreSQL's filtered
// projection, and verify must agree.
func TestRowFilterAndColumnList(t *testing.T) {
	e := newEnv(t)
	const rows = 40000
	e.exec(`CREATE TABLE orders (id int, region text, amount int NOT NULL, secret text NOT NULL, PRIMARY KEY (id, region)) WITH (fillfactor = 100)`,
		fmt.Sprintf(`INSERT INTO orders SELECT g, (ARRAY['eu','us','asia'])[g %% 3 + 1], g %% 1000, repeat(md5(g::text), 14) FROM generate_series(1, %d) g`, rows),
		`CREATE TABLE pay (id int PRIMARY KEY, amount int NOT NULL, memo text)`,
		`ALTER TABLE pay REPLICA IDENTITY FULL`,
		`INSERT INTO pay SELECT g, g * 10, 'm' || g FROM generate_series(1, 50) g`,
		`VACUUM ANALYZE orders`)

	logs, seen := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))
	cfg.CopyWorkers = 4
	cfg.Tables = []string{"public.orders", "public.pay"}
	cfg.ExcludeColumns = []string{"public.orders.secret"}
	cfg.RowFilters = []string{"public.orders:WHERE region IN ('eu', 'us')", "pay:amount > 200"}
	e.mustCatchUp(cfg)
	split := seen.FilterMessage("copying table in page ranges").All()
	if len(split) != 1 || split[0].ContextMap()["table"] != "public.orders" {
		t.Fatalf("orders was not copied in page ranges: %v", split)
	}

	sameRows(t, "ClickHouse columns of orders",
		e.chStrings("SELECT name FROM system.columns WHERE database = '"+e.db+"' AND table = 'orders' AND name NOT LIKE '\\_ferry%' ORDER BY name"),
		[][]string{{"amount"}, {"id"}, {"region"}})
	check := func(when string) {
		t.Helper()
		sameRows(t, "orders "+when,
			e.chStrings("SELECT toString(id), region, toString(amount) FROM "+e.table("orders")+" FINAL WHERE _ferry_deleted = 0 ORDER BY id, region"),
			e.pgStrings(`SELECT id, region, amount FROM orders WHERE region IN ('eu', 'us') ORDER BY id, region COLLATE "C"`))
		sameRows(t, "pay "+when,
			e.chStrings("SELECT toString(id), toString(amount), ifNull(memo, 'NULL') FROM "+e.table("pay")+" FINAL WHERE _ferry_deleted = 0 ORDER BY id"),
			e.pgStrings(`SELECT id, amount, coalesce(memo, 'NULL') FROM pay WHERE amount > 200 ORDER BY id`))
		counts := e.verifyAll(cfg)
		if counts["public.orders"] == 0 || counts["public.orders"] >= rows {
			t.Errorf("verify compared %d rows of orders, want the filtered share of %d", counts["public.orders"], rows)
		}
	}
	check("after the copy")

	e.exec(
		// orders: enter, leave, move within, stay out, insert in and out, delete in and out.
		`UPDATE orders SET region = 'us' WHERE id = 2`,   // asia -> us: enters
		`UPDATE orders SET region = 'asia' WHERE id = 3`, // eu -> asia: leaves
		`UPDATE orders SET region = 'eu' WHERE id = 4`,   // us -> eu: stays in
		`UPDATE orders SET amount = amount + 1 WHERE id IN (5, 6, 7)`,
		`INSERT INTO orders VALUES (100001, 'eu', 1, 'x'), (100002, 'asia', 2, 'y')`,
		`DELETE FROM orders WHERE id IN (9, 10, 11)`,
		// pay: enter, leave, change inside, outside, insert, delete.
		`UPDATE pay SET amount = 500 WHERE id = 1`,
		`UPDATE pay SET amount = 5 WHERE id = 30`,
		`UPDATE pay SET memo = NULL WHERE id = 40`,
		`UPDATE pay SET memo = 'still out' WHERE id = 2`,
		`INSERT INTO pay VALUES (60, 600, 'in'), (61, 6, 'out')`,
		`DELETE FROM pay WHERE id IN (41, 3)`)
	e.mustCatchUp(cfg)
	check("after the stream")
	if got := e.chStrings("SELECT toString(count()) FROM " + e.table("orders") + " FINAL WHERE id = 3 AND _ferry_deleted = 0"); got[0][0] != "0" {
		t.Errorf("the row that left the filter is still live in ClickHouse")
	}

	// A column added later is outside orders' column list, so it stays
	// out of ClickHouse; pay, with no column list, gains it.
	e.exec(`ALTER TABLE orders ADD COLUMN extra int DEFAULT 7`, `ALTER TABLE pay ADD COLUMN extra int DEFAULT 7`,
		`UPDATE orders SET amount = 0, extra = 8 WHERE id = 12`, `INSERT INTO orders VALUES (100003, 'us', 3, 'z', 9)`,
		`UPDATE pay SET extra = 8 WHERE id = 50`)
	e.mustCatchUp(cfg)
	check("after columns were added")
	sameRows(t, "ClickHouse columns of orders after a column was added",
		e.chStrings("SELECT name FROM system.columns WHERE database = '"+e.db+"' AND table = 'orders' AND name NOT LIKE '\\_ferry%' ORDER BY name"),
		[][]string{{"amount"}, {"id"}, {"region"}})
	sameRows(t, "pay's added column",
		e.chStrings("SELECT toString(id), toString(extra) FROM "+e.table("pay")+" FINAL WHERE _ferry_deleted = 0 AND id >= 49 ORDER BY id"),
		e.pgStrings(`SELECT id, extra FROM pay WHERE amount > 200 AND id >= 49 ORDER BY id`))
}

// TestFilterRefusals checks that ferry refuses, before it changes
// anything, the filters PostgreSQL would reject or ferry could not
// replicate exactly, naming the table and the column or condition.
func TestFilterRefusals(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE k (id int PRIMARY KEY, a int, b text)`,
		`CREATE TABLE f (id int PRIMARY KEY, a int)`, `ALTER TABLE f REPLICA IDENTITY FULL`,
		`INSERT INTO k VALUES (1, 1, 'x')`)
	for _, c := range []struct {
		name            string
		exclude, filter []string
		want            []string
	}{
		{"key column", []string{"public.k.id"}, nil, []string{`column "id" of table public.k`, "replica identity"}},
		{"no such column", []string{"public.k.zz"}, nil, []string{`table public.k has no column "zz"`}},
		{"identity full", []string{"public.f.a"}, nil, []string{"table public.f has REPLICA IDENTITY FULL"}},
		{"non-key filter", nil, []string{"public.k:WHERE a > 1"}, []string{"table public.k", `column "a"`, "REPLICA IDENTITY FULL", "--append-only"}},
		{"bad condition", nil, []string{"public.k:WHERE nope > 1"}, []string{"table public.k", "nope"}},
		{"unreplicated table", nil, []string{"public.zz:WHERE id > 1"}, []string{"public.zz", "does not replicate"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := e.config()
			cfg.Tables = []string{"public.k", "public.f"}
			cfg.ExcludeColumns, cfg.RowFilters = c.exclude, c.filter
			err := e.catchUp(cfg)
			if err == nil {
				t.Fatal("ferry started")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	var pubs int
	if err := e.pg.QueryRow(t.Context(), `SELECT count(*) FROM pg_publication`).Scan(&pubs); err != nil {
		t.Fatal(err)
	}
	if pubs != 0 {
		t.Errorf("a refused start left %d publications", pubs)
	}

	// Accepted once, a filter cannot change under the same slot.
	cfg := e.config()
	cfg.Tables = []string{"public.k", "public.f"}
	cfg.RowFilters = []string{"public.k:WHERE id > 0"}
	e.mustCatchUp(cfg)
	var qual string
	if err := e.pg.QueryRow(t.Context(), `SELECT rowfilter FROM pg_publication_tables WHERE pubname = 'ferry' AND tablename = 'k'`).Scan(&qual); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(qual, "id > 0") {
		t.Errorf("the publication's row filter of k is %q", qual)
	}
	cfg.RowFilters = []string{"public.k:WHERE id > 1"}
	err := e.catchUp(cfg)
	if err == nil || !strings.Contains(err.Error(), "row filter was WHERE id > 0, now WHERE id > 1") || !strings.Contains(err.Error(), "ferry teardown") {
		t.Fatalf("a changed filter: %v", err)
	}

	// The way out the error names: a teardown, then a start that copies
	// anew under the new filter (k's rows of id > 1 only).
	e.exec(`INSERT INTO k VALUES (2, 2, 'y'), (3, 3, 'z')`)
	if _, err := replicator.Teardown(t.Context(), cfg, replicator.TeardownOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustCatchUp(cfg)
	sameRows(t, "k under the new filter", e.chStrings("SELECT toString(id) FROM "+e.table("k")+" FINAL WHERE _ferry_deleted = 0 ORDER BY id"),
		[][]string{{"2"}, {"3"}})
	e.verifyAll(cfg)

	// The same for a column list: the new copy's ClickHouse table lacks b.
	cfg.ExcludeColumns = []string{"public.k.b"}
	if _, err := replicator.Teardown(t.Context(), cfg, replicator.TeardownOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustCatchUp(cfg)
	sameRows(t, "k's columns without b", e.chStrings("SELECT name FROM system.columns WHERE database = '"+e.db+"' AND table = 'k' AND name NOT LIKE '\\_ferry%' ORDER BY name"),
		[][]string{{"a"}, {"id"}})
	e.verifyAll(cfg)
}

// TestFilterAppendOnlyAndAdded: an append-only table may exclude any
// column and filter on any (only inserts are published); and a filtered
// table added to --tables on a restart joins its publication with the
// filter, its copy under it.
func TestFilterAppendOnlyAndAdded(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE ev (id int, kind text NOT NULL, body text NOT NULL)`,
		`INSERT INTO ev SELECT g, (ARRAY['click','view'])[g % 2 + 1], 'b' || g FROM generate_series(1, 100) g`,
		`CREATE TABLE k (id int PRIMARY KEY, a int NOT NULL, b text NOT NULL)`,
		`INSERT INTO k SELECT g, g, 'x' || g FROM generate_series(1, 20) g`,
		`CREATE TABLE late (id int PRIMARY KEY, a int NOT NULL, b text NOT NULL)`,
		`INSERT INTO late SELECT g, g, 'y' || g FROM generate_series(1, 20) g`)
	cfg := e.config()
	cfg.Tables = []string{"public.k"}
	cfg.AppendOnly = []string{"public.ev"}
	cfg.ExcludeColumns = []string{"public.ev.id"}
	cfg.RowFilters = []string{"public.ev:WHERE kind = 'click'"}
	e.mustCatchUp(cfg)
	e.exec(`INSERT INTO ev VALUES (101, 'click', 'new'), (102, 'view', 'new')`)
	e.mustCatchUp(cfg)
	sameRows(t, "ev", e.chStrings("SELECT kind, body FROM "+e.table("ev")+" ORDER BY body"),
		e.pgStrings(`SELECT kind, body FROM ev WHERE kind = 'click' ORDER BY body COLLATE "C"`))
	sameRows(t, "ev's columns", e.chStrings("SELECT name FROM system.columns WHERE database = '"+e.db+"' AND table = 'ev' AND name NOT LIKE '\\_ferry%' ORDER BY name"),
		[][]string{{"body"}, {"kind"}})

	cfg.Tables = []string{"public.k", "public.late"}
	cfg.ExcludeColumns = append(cfg.ExcludeColumns, "public.late.b")
	cfg.RowFilters = append(cfg.RowFilters, "public.late:WHERE id % 2 = 0")
	e.mustCatchUp(cfg)
	e.exec(`UPDATE late SET id = id + 1000 WHERE id IN (2, 3)`, `INSERT INTO late VALUES (40, 1, 'z'), (41, 1, 'z')`, `UPDATE k SET a = 0 WHERE id = 1`)
	e.mustCatchUp(cfg)
	sameRows(t, "late", e.chStrings("SELECT toString(id), toString(a) FROM "+e.table("late")+" FINAL WHERE _ferry_deleted = 0 ORDER BY id"),
		e.pgStrings(`SELECT id, a FROM late WHERE id % 2 = 0 ORDER BY id`))
	sameRows(t, "late's columns", e.chStrings("SELECT name FROM system.columns WHERE database = '"+e.db+"' AND table = 'late' AND name NOT LIKE '\\_ferry%' ORDER BY name"),
		[][]string{{"a"}, {"id"}})
	e.verifyAll(cfg)
}
