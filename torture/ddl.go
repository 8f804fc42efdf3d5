package torture

import (
	"fmt"
	"strings"
)

// ddl is one schema change under load: a column added (with or without a
// default), dropped, renamed or widened, or a new table. The generator's
// model of the table changes at once; sessions that run older statements
// against the new shape fail and roll back, as a user's would.
func (g *gen) ddl(session int) op {
	t := g.pick()
	for i := 0; t.Key == keyAppend && g.avoid["append-rebuild"] && i < 10; i++ {
		t = g.pick()
	}
	if t.Key == keyAppend && g.avoid["append-rebuild"] {
		return g.newOp(session, "no-ddl", s("SELECT 1"))
	}
	alter := "ALTER TABLE " + t.q() + " "
	fullDDL := t.Key != keyFull || !g.avoid["full-ddl"]
	switch n := g.r.IntN(10); {
	case n < 3 && fullDDL:
		kinds := []string{"int4", "text", "dec10", "ts", "bool", "jsonb"}
		if g.binaryTypes {
			// ferry reads inet as text: a stream in binary format that
			// meets it starts again in text.
			kinds = append(kinds, "inet")
		}
		ct := kinds[g.r.IntN(len(kinds))]
		c := column{Name: fmt.Sprintf("add%d_%s", g.nextID, ct), Type: ct}
		t.Cols = append(t.Cols, c)
		sql := alter + "ADD COLUMN " + quoteIdent(c.Name) + " " + typeByName(ct).sql
		kind := "add-column"
		if g.r.IntN(3) == 0 {
			sql += " DEFAULT " + typedLit(g.value(column{Type: ct}, false), c)
			kind = "add-column-default"
		}
		return g.newOp(session, kind, s(sql))
	case n < 5 && len(t.Cols) > 2 && fullDDL && !typeByName(t.Cols[0].Type).textOnModern:
		// The first column only: never body, the last, and never one that
		// --text-columns names, which ferry run's flags fix at start.
		i := 0
		c := t.Cols[i]
		t.Cols = append(t.Cols[:i:i], t.Cols[i+1:]...)
		return g.newOp(session, "drop-column", s(alter+"DROP COLUMN "+quoteIdent(c.Name)))
	case n < 7 && len(t.Cols) > 1 && g.setup && !typeByName(t.Cols[len(t.Cols)-2].Type).textOnModern:
		i := len(t.Cols) - 2 // the column before body (see drop)
		old := t.Cols[i].Name
		t.Cols[i].Name = fmt.Sprintf("ren%d %s", g.nextID, old)
		if len(t.Cols[i].Name) > 60 {
			t.Cols[i].Name = fmt.Sprintf("ren%d", g.nextID)
		}
		return g.newOp(session, "rename-column", s(alter+"RENAME COLUMN "+quoteIdent(old)+" TO "+quoteIdent(t.Cols[i].Name)))
	case n < 8:
		for i, c := range t.Cols {
			if c.Type == "int2" || c.Type == "int4" || c.Type == "varchar" {
				to := map[string]string{"int2": "int8", "int4": "int8", "varchar": "text"}[c.Type]
				t.Cols[i].Type = to
				return g.newOp(session, "widen-column", s(alter+"ALTER COLUMN "+quoteIdent(c.Name)+" TYPE "+typeByName(to).sql))
			}
		}
	}
	if t.Key == keyPartition && g.setup && !g.avoid["partition-ddl"] && g.r.IntN(2) == 0 {
		return g.partitionDDL(session, t)
	}
	if t.hasKey() && g.r.IntN(4) == 0 {
		ri := []string{"FULL", "DEFAULT"}[g.r.IntN(2)]
		return g.newOp(session, "replica-identity-"+strings.ToLower(ri), s(alter+"REPLICA IDENTITY "+ri))
	}
	nt := g.genTable(len(g.tables))
	for i, c := range nt.Cols {
		if typeByName(c.Type).textOnModern {
			// --text-columns was fixed at start; a new table gets none.
			nt.Cols[i].Type = map[string]string{"dateinf": "date", "tsinf": "ts"}[c.Type]
		}
	}
	if nt.Key == keyAppend || nt.Key == keyFull {
		// Only ferry run's flags name append-only tables, and a table
		// without a key joins no publication: make it keyed.
		nt.Key = keyInt
	}
	nt.Name = fmt.Sprintf("new%d_%s", g.nextID, nt.Key)
	g.tables = append(g.tables, nt)
	stmts := []stmt{}
	for _, q := range nt.createSQL() {
		stmts = append(stmts, s(q))
	}
	stmts = append(stmts, g.insertRows(nt, 3, true))
	return g.newOp(session, "create-table", stmts...)
}

// partitionDDL detaches a partition (its rows leave the table, without a
// row of WAL), attaches it back (they return), or drops a detached one.
func (g *gen) partitionDDL(session int, t *table) op {
	if t.detached == "" {
		t.detached = partitionRanges[g.r.IntN(len(partitionRanges))][0]
		return g.newOp(session, "detach-partition", s("ALTER TABLE "+t.q()+" DETACH PARTITION public."+quoteIdent(t.partition(t.detached))))
	}
	from := t.detached
	t.detached = ""
	if g.r.IntN(3) == 0 {
		return g.newOp(session, "drop-detached-partition", s("DROP TABLE public."+quoteIdent(t.partition(from))),
			s(fmt.Sprintf("CREATE TABLE public.%s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')", quoteIdent(t.partition(from)), t.q(), from, rangeEnd(from))))
	}
	return g.newOp(session, "attach-partition", s(fmt.Sprintf("ALTER TABLE %s ATTACH PARTITION public.%s FOR VALUES FROM ('%s') TO ('%s')",
		t.q(), quoteIdent(t.partition(from)), from, rangeEnd(from))))
}

func rangeEnd(from string) string {
	for _, p := range partitionRanges {
		if p[0] == from {
			return p[1]
		}
	}
	return from
}
