package schema

// Column is one PostgreSQL column as ferry replicates it. Values come from the
// catalog (pg_attribute, pg_type), not from pgoutput's Relation message, which
// carries no nullability or type category.
type Column struct {
	Name     string // PostgreSQL name, unquoted
	TypeOID  uint32 // pg_attribute.atttypid (a domain is resolved to its base type)
	TypeMod  int32  // pg_attribute.atttypmod; -1 when none
	TypeName string // format_type(atttypid, atttypmod), for messages
	NotNull  bool   // attnotnull
	Key      bool   // part of the replica identity key (primary key or REPLICA IDENTITY USING INDEX)
	Enum     bool   // the type (or for arrays the element type) is an enum
	ElemOID  uint32 // element type of a one-dimensional array; 0 for scalars
	// Text asks for the column as String in PostgreSQL's text form, whatever
	// its type (the user's --text-columns override).
	Text bool
}

// Table is one PostgreSQL table as ferry replicates it.
type Table struct {
	Schema  string
	Name    string
	Columns []Column // in attnum order, dropped columns left out
	// AppendOnly tables are replicated insert-only (no key needed); ClickHouse
	// deduplicates their rows by WAL position.
	AppendOnly bool
	// FullRow tables have REPLICA IDENTITY FULL and no primary key or unique
	// index: a row is identified by all its columns, which ClickHouse gets as
	// one encoded key column (RowKeyColumn). Rows equal in every column are
	// one row in ClickHouse.
	FullRow bool
}

// QualifiedName is the table's PostgreSQL name, quoted for SQL.
func (t Table) QualifiedName() string { return QuotePG(t.Schema) + "." + QuotePG(t.Name) }

// Capabilities are the ClickHouse server features the DDL and value
// conversion may use. The zero value is the oldest server ferry supports
// (18.16): every temporal and boolean column gets a lossless integer form.
type Capabilities struct {
	DateTime64     bool // DateTime64(6): 20.1+
	Date32         bool // Date32: 21.9+
	Bool           bool // Bool: 21.12+
	IsDeleted      bool // ReplacingMergeTree(ver, is_deleted): 23.2+
	LowCardinality bool // LowCardinality(String) without a setting: 19.9+ (approximately)
}

// CapabilitiesFor returns what a server of the given version supports.
func CapabilitiesFor(major, minor int) Capabilities {
	at := func(ma, mi int) bool { return major > ma || (major == ma && minor >= mi) }
	return Capabilities{
		DateTime64:     at(20, 1),
		Date32:         at(21, 9),
		Bool:           at(21, 12),
		IsDeleted:      at(23, 2),
		LowCardinality: at(19, 9),
	}
}
