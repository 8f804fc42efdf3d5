package schema

// Names of the columns ferry adds to every ClickHouse table.
const (
	VersionColumn  = "_ferry_version"   // UInt64: the change's WAL position, 0 for snapshot rows
	DeletedColumn  = "_ferry_deleted"   // UInt8: 1 when the row was deleted
	SyncedAtColumn = "_ferry_synced_at" // DateTime DEFAULT now(): when ferry wrote the row
	SeqColumn      = "_ferry_seq"       // UInt64, append-only tables only: tells snapshot rows apart
)

// TableMap is a PostgreSQL table mapped onto one ClickHouse server.
type TableMap struct {
	Source  Table
	Name    string      // ClickHouse table name: public.x → x, s.x → s__x
	Columns []ColumnMap // one per Source.Columns entry, same order
	Key     []int       // indexes into Columns of the ORDER BY key; empty for append-only tables
	Caps    Capabilities
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
	zero     any    // what Zero returns
	key      bool   // part of the table's key
	fix      string // the --text-columns option that makes any value fit
}

// converter turns PostgreSQL's text output of one value into the Go value
// clickhouse-go appends to the column.
type converter func(text []byte) (any, error)
