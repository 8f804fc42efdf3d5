package torture

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// stmt is one statement of an operation; a COPY carries its data in
// COPY's text format.
type stmt struct {
	SQL  string
	Copy string // non-empty: SQL is COPY ... FROM STDIN and this its data
}

// op is one unit of the workload: a transaction (or a DDL statement) that
// one session runs. Ops are generated from the seed before the round
// runs, so the list is the round's reproduction.
type op struct {
	ID      int
	Session int
	Kind    string
	Stmts   []stmt
}

// script renders ops as a psql script.
func script(ops []op) string {
	var b strings.Builder
	for _, o := range ops {
		fmt.Fprintf(&b, "-- op %d session %d %s\n", o.ID, o.Session, o.Kind)
		for _, s := range o.Stmts {
			b.WriteString(s.SQL)
			if s.Copy != "" {
				b.WriteString(";\n" + s.Copy + "\\.\n")
				continue
			}
			b.WriteString(";\n")
		}
	}
	return b.String()
}

// gen is the round's generator state.
type gen struct {
	r      *rand.Rand
	tables []*table
	legacy bool
	nextID int
	avoid  map[string]bool // known bugs to steer clear of (Size.Avoid)
	// setup is whether the round runs ferry setup: without DDL capture a
	// rename is documented to look like a drop and an add, and partition
	// DDL leaves no trace in the stream, so neither is generated then.
	setup bool
	// binaryTypes: new tables' columns are of types ferry reads in binary
	// form (Plan.BinaryTypes).
	binaryTypes bool
}

func (g *gen) pick() *table { return g.tables[g.r.IntN(len(g.tables))] }

func (g *gen) newOp(session int, kind string, stmts ...stmt) op {
	g.nextID++
	return op{ID: g.nextID, Session: session, Kind: kind, Stmts: stmts}
}

func s(sql string) stmt { return stmt{SQL: sql} }

// colList is the quoted non-key columns of t.
func colList(t *table) []string {
	out := make([]string, len(t.Cols))
	for i, c := range t.Cols {
		out[i] = quoteIdent(c.Name)
	}
	return out
}

// insertRows is an INSERT of n fresh rows.
func (g *gen) insertRows(t *table, n int, big bool) stmt {
	var rows []string
	for i := 0; i < n; i++ {
		k := t.nextKey
		t.nextKey++
		t.live = append(t.live, k)
		vals := t.keyValues(k)
		for _, c := range t.Cols {
			vals = append(vals, typedLit(g.value(c, big && g.r.IntN(2) == 0), c))
		}
		rows = append(rows, "("+strings.Join(vals, ", ")+")")
	}
	cols := append(t.keyCols(), colList(t)...)
	return s("INSERT INTO " + t.q() + " (" + strings.Join(cols, ", ") + ") VALUES " + strings.Join(rows, ", "))
}

// copyRows is a COPY FROM STDIN of n fresh rows.
func (g *gen) copyRows(t *table, n int) stmt {
	var b strings.Builder
	for i := 0; i < n; i++ {
		k := t.nextKey
		t.nextKey++
		t.live = append(t.live, k)
		var fields []string
		for _, kv := range t.keyValues(k) {
			fields = append(fields, copyField(unlit(kv)))
		}
		for _, c := range t.Cols {
			fields = append(fields, copyField(g.value(c, g.r.IntN(4) == 0)))
		}
		b.WriteString(strings.Join(fields, "\t") + "\n")
	}
	cols := append(t.keyCols(), colList(t)...)
	return stmt{SQL: "COPY " + t.q() + " (" + strings.Join(cols, ", ") + ") FROM STDIN", Copy: b.String()}
}

// unlit undoes lit for the key literals, which COPY takes bare.
func unlit(l string) *string {
	v := l
	if strings.HasPrefix(v, "E'") {
		v = strings.ReplaceAll(v[2:len(v)-1], `\\`, `\`)
	} else if strings.HasPrefix(v, "'") {
		v = v[1 : len(v)-1]
	}
	v = strings.ReplaceAll(v, "''", "'")
	return &v
}

func copyField(v *string) string {
	if v == nil {
		return `\N`
	}
	r := strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)
	return r.Replace(*v)
}

// someKey is a key the table probably holds (or, rarely, never held).
func (g *gen) someKey(t *table) int64 {
	if len(t.live) == 0 || g.r.IntN(20) == 0 {
		return t.nextKey + 1000
	}
	return t.live[g.r.IntN(len(t.live))]
}

func (g *gen) forget(t *table, k int64) {
	for i, x := range t.live {
		if x == k {
			t.live = append(t.live[:i], t.live[i+1:]...)
			return
		}
	}
}

// setCols is a SET clause for one to all non-key columns; toastFree
// leaves the TOAST-able columns alone, so their values go unchanged.
func (g *gen) setCols(t *table, toastFree bool) string {
	var parts []string
	for _, c := range t.Cols {
		if toastFree && typeByName(c.Type).toast {
			continue
		}
		if g.r.IntN(2) == 0 || len(parts) == 0 && c.Name == t.Cols[len(t.Cols)-1].Name {
			parts = append(parts, quoteIdent(c.Name)+" = "+typedLit(g.value(c, false), c))
		}
	}
	if len(parts) == 0 {
		c := t.Cols[0]
		parts = append(parts, quoteIdent(c.Name)+" = "+typedLit(g.value(c, false), c))
	}
	return strings.Join(parts, ", ")
}

// keyExpr is the SQL for the key columns of key number expression e.
func (t *table) keyExpr(e string) []string {
	switch t.Key {
	case keyText:
		return []string{`'k' || (` + e + `) || E' ''é\\"'`}
	case keyUUID:
		return []string{`('00000000-0000-4000-8000-' || lpad(to_hex(` + e + `), 12, '0'))::uuid`}
	case keyComposite:
		return []string{`(` + e + `) % 7`, `'k' || (` + e + `)`}
	case keyPartition:
		return []string{e, fmt.Sprintf(`make_date((1900 + (%s) * 37 %% %d)::int, (1 + (%s) %% 12)::int, (1 + (%s) %% 28)::int)`, e, t.years(), e, e)}
	}
	return []string{e}
}

// insertSelect copies n existing rows' values under fresh keys.
func (g *gen) insertSelect(t *table, n int) stmt {
	lo := t.nextKey
	t.nextKey += int64(n)
	for k := lo; k < t.nextKey; k++ {
		t.live = append(t.live, k)
	}
	cols := append(t.keyCols(), colList(t)...)
	var src []string
	for _, c := range colList(t) {
		src = append(src, "s."+c)
	}
	sel := append(t.keyExpr("g"), src...)
	return s(fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM generate_series(%d, %d) g CROSS JOIN LATERAL (SELECT * FROM %s ORDER BY id LIMIT 1 OFFSET g %% 3) s",
		t.q(), strings.Join(cols, ", "), strings.Join(sel, ", "), lo, t.nextKey-1, t.q()))
}
