package schema

// Names of the columns ferry adds to every ClickHouse table.
const (
	VersionColumn  = "_ferry_version"   // UInt64: the change's WAL position, 0 for snapshot rows
	DeletedColumn  = "_ferry_deleted"   // UInt8: 1 when the row was deleted
	SyncedAtColumn = "_ferry_synced_at" // DateTime DEFAULT now(): when ferry wrote the row
	SeqColumn      = "_ferry_seq"       // UInt64, append-only tables only: tells snapshot rows apart
	RowKeyColumn   = "_ferry_row_key"   // String, FullRow tables only: a hash of the whole row's encoding (see AppendEncoded)
)

// MetaColumns are ferry's own columns of an INSERT, in order after the
// source columns: the version, the deleted flag, and the row key of a
// FullRow table or the sequence of an append-only one.
func (m *TableMap) MetaColumns() []string {
	cols := []string{VersionColumn, DeletedColumn}
	switch {
	case m.Source.AppendOnly:
		cols = append(cols, SeqColumn)
	case m.Source.FullRow:
		cols = append(cols, RowKeyColumn)
	}
	return cols
}

// TableMap is a PostgreSQL table mapped onto one ClickHouse server.
type TableMap struct {
	Source  Table
	Name    string      // ClickHouse table name: public.x → x, s.x → s__x
	Columns []ColumnMap // one per Source.Columns entry, same order
	Key     []int       // indexes into Columns of the ORDER BY key; empty for append-only tables
	Caps    Capabilities
	Shape   Shape // the user's choices of the table's layout (SetShape)
}

// ColumnMap is one column's ClickHouse side.
type ColumnMap struct {
	Name     string // the PostgreSQL column name, unquoted (ClickHouse uses the same)
	Type     string // ClickHouse type, e.g. "Nullable(Decimal(10, 2))"
	Nullable bool   // Type is Nullable(...) or LowCardinality(Nullable(...))
	// Fallback is true when ferry has no mapping for the PostgreSQL type and
	// the column goes as String in PostgreSQL's text form (warn once).
	Fallback bool
	conv     converter
	typed    func(ColumnMap) ColumnBuilder // a typed builder of a scalar, else nil
	bin      any                           // the typed builder's binary reader (binaryOf), else nil
	zero     any                           // what Zero returns
	key      bool                          // part of the table's key
	nullZero bool                          // a NULL becomes zero (Table.NullAsDefault)
	fix      string                        // the --text-columns option that makes any value fit
}

// converter turns PostgreSQL's text output of one value into the Go value
// clickhouse-go appends to the column.
type converter func(text []byte) (any, error)
