package schema

import (
	"slices"
	"strings"
)

// CreateTableDDL is the one CREATE TABLE IF NOT EXISTS statement (no
// trailing semicolon) of the table in the given ClickHouse database: the
// columns in source order, then ferry's own columns, a ReplacingMergeTree
// engine versioned by VersionColumn, and the key as ORDER BY
// ((VersionColumn, SeqColumn) for append-only tables, RowKeyColumn for
// FullRow tables).
func (m *TableMap) CreateTableDDL(database string) string {
	defs := make([]string, 0, len(m.Columns)+4)
	for _, c := range m.Columns {
		def := QuoteCH(c.Name) + " " + c.Type
		if codec, ok := m.Shape.Codecs[c.Name]; ok {
			def += " CODEC(" + codec + ")"
		}
		defs = append(defs, def)
	}
	defs = append(defs,
		QuoteCH(VersionColumn)+" UInt64",
		QuoteCH(DeletedColumn)+" UInt8",
		QuoteCH(SyncedAtColumn)+" DateTime DEFAULT now()")
	switch {
	case m.Source.AppendOnly:
		defs = append(defs, QuoteCH(SeqColumn)+" UInt64")
	case m.Source.FullRow:
		defs = append(defs, QuoteCH(RowKeyColumn)+" String")
	}
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + QuoteCH(database) + "." + QuoteCH(m.Name) + " (\n    ")
	b.WriteString(strings.Join(defs, ",\n    "))
	b.WriteString("\n) ENGINE = " + m.engine() + "\n")
	if m.Shape.PartitionBy != "" {
		b.WriteString("PARTITION BY " + m.Shape.PartitionBy + "\n")
	}
	b.WriteString("ORDER BY (" + strings.Join(m.orderBy(), ", ") + ")")
	b.WriteString(m.shapeClauses())
	return b.String()
}

// engine is the table engine: ReplacingMergeTree on the version, with the
// deleted flag where the server supports it.
func (m *TableMap) engine() string {
	if m.Caps.IsDeleted {
		return "ReplacingMergeTree(" + QuoteCH(VersionColumn) + ", " + QuoteCH(DeletedColumn) + ")"
	}
	return "ReplacingMergeTree(" + QuoteCH(VersionColumn) + ")"
}

// OrderByColumns lists, unquoted, the columns of the table's sorting key:
// the key's (in the shape's order, if it gives one) or ferry's own for
// tables without a key. ReplacingMergeTree keeps one row per value of it.
func (m *TableMap) OrderByColumns() []string {
	if len(m.Shape.OrderBy) > 0 {
		return slices.Clone(m.Shape.OrderBy)
	}
	return m.keyOrder()
}

// orderBy lists the quoted sorting key columns.
func (m *TableMap) orderBy() []string {
	cols := m.OrderByColumns()
	for i, c := range cols {
		cols[i] = QuoteCH(c)
	}
	return cols
}

// InsertSQL is "INSERT INTO db.t (columns...)" with an explicit column list
// and no VALUES clause, as clickhouse-go's PrepareBatch takes it. A row's
// values go in this order: one per column, the version (uint64), the
// deleted flag (uint8) and, for append-only tables, the seq (uint64) or,
// for FullRow tables, the row key (string): see MetaColumns.
func (m *TableMap) InsertSQL(database string) string {
	cols := make([]string, 0, len(m.Columns)+3)
	for _, c := range m.Columns {
		cols = append(cols, QuoteCH(c.Name))
	}
	for _, c := range m.MetaColumns() {
		cols = append(cols, QuoteCH(c))
	}
	return "INSERT INTO " + QuoteCH(database) + "." + QuoteCH(m.Name) + " (" + strings.Join(cols, ", ") + ")"
}

// SelectColumnsSQL is the PostgreSQL-quoted list of the source columns, in
// order and comma separated, for the SELECT of the initial copy.
func (m *TableMap) SelectColumnsSQL() string {
	cols := make([]string, 0, len(m.Source.Columns))
	for _, c := range m.Source.Columns {
		cols = append(cols, QuotePG(c.Name))
	}
	return strings.Join(cols, ", ")
}
