package replicator_test

import "testing"

// TestTablesNamedTwice: a table named twice in --tables or --append-only
// (a flag given twice, or the table spelt two ways) is replicated once.
// ferry stopped, saying two tables would become one ClickHouse table.
func TestTablesNamedTwice(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY)`, `CREATE TABLE b (id int)`, `INSERT INTO a VALUES (1)`, `INSERT INTO b VALUES (1), (1)`)
	cfg := e.config()
	cfg.Tables = []string{"public.a", "a", "public.a"}
	cfg.AppendOnly = []string{"b", "public.b"}
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg); len(n) != 2 || n["public.a"] != 1 || n["public.b"] != 2 {
		t.Errorf("verified %v, want 1 row of a and 2 of b", n)
	}
}
