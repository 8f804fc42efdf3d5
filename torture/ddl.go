package torture

import "fmt"

// ddl is one schema change under load: a column added (with or without a
// default), dropped, renamed or widened, or a new table. The generator's
// model of the table changes at once; sessions that run older statements
// against the new shape fail and roll back, as a user's would.
func (g *gen) ddl(session int) op {
	t := g.pick()
	alter := "ALTER TABLE " + t.q() + " "
	switch n := g.r.IntN(10); {
	case n < 3:
		ct := []string{"int4", "text", "dec10", "ts", "bool", "jsonb"}[g.r.IntN(6)]
		c := column{Name: fmt.Sprintf("add%d_%s", g.nextID, ct), Type: ct}
		t.Cols = append(t.Cols, c)
		sql := alter + "ADD COLUMN " + quoteIdent(c.Name) + " " + typeByName(ct).sql
		kind := "add-column"
		if g.r.IntN(3) == 0 {
			sql += " DEFAULT " + typedLit(g.value(column{Type: ct}, false), c)
			kind = "add-column-default"
		}
		return g.newOp(session, kind, s(sql))
	case n < 5 && len(t.Cols) > 2:
		i := g.r.IntN(len(t.Cols) - 1) // never body, the last
		c := t.Cols[i]
		t.Cols = append(t.Cols[:i:i], t.Cols[i+1:]...)
		return g.newOp(session, "drop-column", s(alter+"DROP COLUMN "+quoteIdent(c.Name)))
	case n < 7 && len(t.Cols) > 1:
		i := g.r.IntN(len(t.Cols) - 1)
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
