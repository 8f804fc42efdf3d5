package schema

import (
	"fmt"
	"strings"
)

// ColumnChange is one difference between two mappings of a table.
type ColumnChange struct {
	Kind ChangeKind
	From *ColumnMap // the column before (nil for an added column)
	To   *ColumnMap // the column after (nil for a dropped column)
}

// ChangeKind says what happened to a column.
type ChangeKind int

// The kinds of column change.
const (
	ColumnAdded ChangeKind = iota
	ColumnDropped
	ColumnRenamed
	ColumnRetyped // the ClickHouse type changed
)

// Diff lists how to turns from into to. renames maps an old column name
// to its new one; a column missing from to that renames does not name is
// dropped, and one new in to is added. Columns whose ClickHouse type is
// the same are unchanged, whatever PostgreSQL's type did (varchar(10) to
// text, say).
func Diff(from, to *TableMap, renames map[string]string) []ColumnChange {
	var changes []ColumnChange
	after := map[string]*ColumnMap{}
	for i := range to.Columns {
		after[to.Columns[i].Name] = &to.Columns[i]
	}
	seen := map[string]bool{}
	for i := range from.Columns {
		old := &from.Columns[i]
		name := old.Name
		if n, ok := renames[name]; ok {
			name = n
		}
		nw := after[name]
		switch {
		case nw == nil:
			changes = append(changes, ColumnChange{Kind: ColumnDropped, From: old})
			continue
		case name != old.Name:
			changes = append(changes, ColumnChange{Kind: ColumnRenamed, From: old, To: nw})
		}
		if nw.Type != old.Type {
			changes = append(changes, ColumnChange{Kind: ColumnRetyped, From: old, To: nw})
		}
		seen[name] = true
	}
	for i := range to.Columns {
		if !seen[to.Columns[i].Name] {
			changes = append(changes, ColumnChange{Kind: ColumnAdded, To: &to.Columns[i]})
		}
	}
	return changes
}

// SameKey reports whether two mappings order rows by the same columns, in
// the same ClickHouse types: ClickHouse cannot change a table's ORDER BY.
func SameKey(a, b *TableMap) bool {
	if a.Source.FullRow != b.Source.FullRow || a.Source.AppendOnly != b.Source.AppendOnly || len(a.Key) != len(b.Key) {
		return false
	}
	for i := range a.Key {
		ca, cb := a.Columns[a.Key[i]], b.Columns[b.Key[i]]
		if ca.Name != cb.Name || ca.Type != cb.Type {
			return false
		}
	}
	return true
}

// InPlace reports whether ClickHouse can apply a change to the table as
// it is, keeping its rows: adding a column, dropping a non-key one,
// renaming a non-key one where the server has RENAME COLUMN, and widening
// a type that MODIFY COLUMN converts exactly (an integer to a wider one,
// a Decimal to one with at least as many digits on both sides, and the
// Nullable form of the same). Everything else needs the table rebuilt.
func InPlace(c ColumnChange, caps Capabilities) bool {
	switch c.Kind {
	case ColumnAdded:
		return true
	case ColumnDropped:
		return !c.From.key
	case ColumnRenamed:
		return caps.RenameColumn && !c.From.key
	case ColumnRetyped:
		return !c.From.key && widens(c.From.Type, c.To.Type)
	}
	return false
}

// widens reports whether type to holds every value of type from, and
// MODIFY COLUMN converts them exactly.
func widens(from, to string) bool {
	f, fn := unwrapNullable(from)
	t, tn := unwrapNullable(to)
	if fn && !tn {
		return false
	}
	ints := []string{"Int16", "Int32", "Int64"}
	fi, ti := indexOf(ints, f), indexOf(ints, t)
	if fi >= 0 && ti >= 0 {
		return ti >= fi
	}
	fp, fs, ok1 := decimalArgs(f)
	tp, ts, ok2 := decimalArgs(t)
	return ok1 && ok2 && ts >= fs && tp-ts >= fp-fs
}

func unwrapNullable(t string) (string, bool) {
	if strings.HasPrefix(t, "Nullable(") && strings.HasSuffix(t, ")") {
		return t[len("Nullable(") : len(t)-1], true
	}
	return t, false
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func decimalArgs(t string) (p, s int, ok bool) {
	var n int
	if c, err := fmt.Sscanf(t, "Decimal(%d, %d)%n", &p, &s, &n); err != nil || c != 2 || n != len(t) {
		return 0, 0, false
	}
	return p, s, true
}

// AlterSQL is the statement that applies an in-place change.
func (m *TableMap) AlterSQL(database string, c ColumnChange) string {
	t := "ALTER TABLE " + QuoteCH(database) + "." + QuoteCH(m.Name) + " "
	switch c.Kind {
	case ColumnAdded:
		return t + "ADD COLUMN " + QuoteCH(c.To.Name) + " " + c.To.Type
	case ColumnDropped:
		return t + "DROP COLUMN " + QuoteCH(c.From.Name)
	case ColumnRenamed:
		return t + "RENAME COLUMN " + QuoteCH(c.From.Name) + " TO " + QuoteCH(c.To.Name)
	case ColumnRetyped:
		return t + "MODIFY COLUMN " + QuoteCH(c.To.Name) + " " + c.To.Type
	}
	return ""
}

// ExchangeTablesSQL swaps two tables of database atomically.
func ExchangeTablesSQL(database, a, b string) string {
	return "EXCHANGE TABLES " + QuoteCH(database) + "." + QuoteCH(a) + " AND " + QuoteCH(database) + "." + QuoteCH(b)
}

// RenameTableSQL renames tables in one statement: pairs of (from, to)
// ClickHouse table names in database.
func RenameTableSQL(database string, pairs ...[2]string) string {
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = QuoteCH(database) + "." + QuoteCH(p[0]) + " TO " + QuoteCH(database) + "." + QuoteCH(p[1])
	}
	return "RENAME TABLE " + strings.Join(parts, ", ")
}
