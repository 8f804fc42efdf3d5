package schema

import "strings"

// CurrentViewSuffix ends the name of a table's current-state view.
const CurrentViewSuffix = "_current"

// CurrentViewName is the name of the current-state view of ClickHouse
// table name.
func CurrentViewName(name string) string { return name + CurrentViewSuffix }

// CurrentViewSelect is the SELECT of the table's current-state view: the
// source columns, in order, without ferry's own. A keyed or FullRow table
// shows its live rows (FINAL, not deleted); an append-only table, which
// gets no deletes and whose rows never replace one another, shows every
// row, without FINAL's cost.
func (m *TableMap) CurrentViewSelect(database string) string {
	cols := make([]string, 0, len(m.Columns))
	for _, c := range m.Columns {
		cols = append(cols, QuoteCH(c.Name))
	}
	from := QuoteCH(database) + "." + QuoteCH(m.Name)
	if m.Source.AppendOnly {
		return "SELECT " + strings.Join(cols, ", ") + " FROM " + from
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + from + " FINAL WHERE " + QuoteCH(DeletedColumn) + " = 0"
}

// CurrentViewSQL is the statement that creates (or, with replace, creates
// or replaces) the table's current-state view.
func (m *TableMap) CurrentViewSQL(database string, replace bool) string {
	verb := "CREATE VIEW "
	if replace {
		verb = "CREATE OR REPLACE VIEW "
	}
	return verb + QuoteCH(database) + "." + QuoteCH(CurrentViewName(m.Name)) + " AS " + m.CurrentViewSelect(database)
}
