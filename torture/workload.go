package torture

import (
	"fmt"
	"strings"
)

// writable reports whether t takes updates and deletes: append-only
// tables are replicated insert-only, so they get inserts only.
func writable(t *table) bool { return t.Key != keyAppend }

// change is one data-changing statement on t; it may be several
// statements (a delete and a re-insert of the same key).
func (g *gen) change(t *table) ([]stmt, string) {
	n := g.r.IntN(100)
	if !writable(t) {
		n = g.r.IntN(40) // inserts, COPY and INSERT ... SELECT only
	}
	switch {
	case n < 15:
		return []stmt{g.insertRows(t, 1+g.r.IntN(5), g.r.IntN(4) == 0)}, "insert"
	case n < 25 && !(t.Key == keyAppend && g.avoid["append-copy"]):
		return []stmt{g.copyRows(t, 1+g.r.IntN(20))}, "copy"
	case n < 32:
		return []stmt{g.insertSelect(t, 1+g.r.IntN(4))}, "insert-select"
	case n < 40 && !writable(t):
		return []stmt{g.insertRows(t, 1, true)}, "insert-toast"
	case n < 55:
		k := g.someKey(t)
		return []stmt{s("UPDATE " + t.q() + " SET " + g.setCols(t, false) + " WHERE " + t.where(k))}, "update"
	case n < 65:
		k := g.someKey(t)
		return []stmt{s("UPDATE " + t.q() + " SET " + g.setCols(t, true) + " WHERE " + t.where(k))}, "update-toast-unchanged"
	case n < 73 && t.hasKey():
		k, nk := g.someKey(t), t.nextKey
		t.nextKey++
		g.forget(t, k)
		t.live = append(t.live, nk)
		var sets []string
		for i, c := range t.keyCols() {
			sets = append(sets, c+" = "+t.keyValues(nk)[i])
		}
		return []stmt{s("UPDATE " + t.q() + " SET " + strings.Join(sets, ", ") + " WHERE " + t.where(k))}, "update-key"
	case n < 83:
		k := g.someKey(t)
		g.forget(t, k)
		return []stmt{s("DELETE FROM " + t.q() + " WHERE " + t.where(k))}, "delete"
	case n < 91:
		k := g.someKey(t)
		ins := g.insertRows(t, 1, g.r.IntN(2) == 0)
		// insertRows took a fresh key: put the deleted one in its place.
		fresh := t.nextKey - 1
		t.nextKey--
		t.live = t.live[:len(t.live)-1]
		ins.SQL = strings.Replace(ins.SQL, "VALUES ("+strings.Join(t.keyValues(fresh), ", "), "VALUES ("+strings.Join(t.keyValues(k), ", "), 1)
		return []stmt{s("DELETE FROM " + t.q() + " WHERE " + t.where(k)), ins}, "delete-reinsert"
	case n < 95 && t.Key != keyText && t.Key != keyUUID:
		lo := g.r.Int64N(t.nextKey + 1)
		return []stmt{s(fmt.Sprintf("DELETE FROM %s WHERE id BETWEEN %d AND %d", t.q(), lo%7, lo%7+1))}, "delete-range"
	}
	return []stmt{g.insertRows(t, 2, true)}, "insert-toast"
}

// txn is one transaction of a session: a few changes, maybe under
// savepoints that roll back, maybe rolled back as a whole.
func (g *gen) txn(session int) op {
	stmts := []stmt{s("BEGIN")}
	var kinds []string
	n := 1 + g.r.IntN(4)
	for i := 0; i < n; i++ {
		t := g.pick()
		ch, kind := g.change(t)
		if g.r.IntN(6) == 0 {
			sp := fmt.Sprintf("sp%d", i)
			stmts = append(stmts, s("SAVEPOINT "+sp))
			stmts = append(stmts, ch...)
			if g.r.IntN(2) == 0 {
				stmts = append(stmts, s("ROLLBACK TO SAVEPOINT "+sp))
				kind += "(rolled back to savepoint)"
			} else {
				stmts = append(stmts, s("RELEASE SAVEPOINT "+sp))
			}
		} else {
			stmts = append(stmts, ch...)
		}
		kinds = append(kinds, kind)
		if g.r.IntN(15) == 0 {
			// Held open across other sessions' commits (and DDL).
			stmts = append(stmts, s("SELECT pg_sleep(1)"))
		}
	}
	end := "COMMIT"
	if g.r.IntN(10) == 0 {
		end = "ROLLBACK"
	}
	stmts = append(stmts, s(end))
	return g.newOp(session, "txn["+strings.Join(kinds, ",")+"] "+end, stmts...)
}

// bigTxn is a transaction well over logical_decoding_work_mem (64kB on
// the round's role), so that PostgreSQL streams it while it runs.
func (g *gen) bigTxn(session int) op {
	stmts := []stmt{s("BEGIN")}
	for i := 0; i < 3; i++ {
		t := g.pick()
		if t.Key == keyAppend && g.avoid["append-copy"] {
			stmts = append(stmts, g.insertRows(t, 20, true))
			continue
		}
		stmts = append(stmts, g.copyRows(t, 100+g.r.IntN(200)))
		if writable(t) {
			stmts = append(stmts, s("UPDATE "+t.q()+" SET "+g.setCols(t, true)+" WHERE "+t.keyCols()[0]+" IS NOT NULL"))
		}
	}
	end := "COMMIT"
	if g.r.IntN(5) == 0 {
		end = "ROLLBACK"
	}
	stmts = append(stmts, s(end))
	return g.newOp(session, "big-txn "+end, stmts...)
}

// truncate empties a table, or one partition of a partitioned table.
func (g *gen) truncate(session int) (op, bool) {
	t := g.pick()
	if !writable(t) {
		return op{}, false
	}
	target := t.q()
	if t.Key == keyPartition && g.r.IntN(2) == 0 && !g.avoid["partition-truncate"] {
		target = "public." + quoteIdent(t.partition("2000-01-01"))
	} else {
		t.live = nil
	}
	return g.newOp(session, "truncate", s("TRUNCATE "+target)), true
}
