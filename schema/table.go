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
	ElemOID  uint32 // element type of an array (a domain resolved to its base, with its typmod in TypeMod); 0 for scalars
	// TypeBaseName is the unqualified pg_type.typname of the type TypeOID
	// names or, for an array, of ElemOID (domains resolved, as for TypeOID):
	// "citext", "hstore", "geometry". Extension types have no fixed OID, so
	// ferry recognises them by this name.
	TypeBaseName string
	// Dims is pg_attribute.attndims: the number of array dimensions the
	// column was declared with (int[][] is 2), 0 for scalars and for arrays
	// whose declaration doesn't say (CREATE TABLE AS, domains over arrays).
	// PostgreSQL doesn't enforce it; ferry maps an array declared with more
	// than one dimension to String.
	Dims int
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
	// NullAsDefault maps columns that may hold NULL to non-Nullable
	// ClickHouse types, a NULL becoming the type's default (0, '', the
	// epoch, an empty array): --nullable=default-values.
	NullAsDefault bool `json:",omitempty"`
	// NativeJSON maps json and jsonb columns (not arrays of them, nor key
	// columns) to ClickHouse's JSON type where the server has it
	// (Capabilities.JSON), refusing values it would not store exactly
	// (CheckJSON): --json-type=json. Else they are String.
	NativeJSON bool `json:",omitempty"`
	// DistinctNull: the table's row keys encode NULL apart from the text \N
	// (AppendRowKeyValue). Tables whose ClickHouse rows were keyed before
	// ferry did so keep the old keys until the table is copied anew.
	DistinctNull bool `json:",omitempty"`
	// RowFilter is the PostgreSQL condition (without WHERE) the replicated
	// rows satisfy: the publication's row filter, which copies and verify
	// apply too. "" for every row.
	RowFilter string `json:",omitempty"`
}

// QualifiedName is the table's PostgreSQL name, quoted for SQL.
func (t Table) QualifiedName() string { return QuotePG(t.Schema) + "." + QuotePG(t.Name) }

// Capabilities are the ClickHouse server features the DDL and value
// conversion may use. The zero value is the oldest server ferry supports
// (18.16): every temporal and boolean column gets a lossless integer form.
type Capabilities struct {
	// DateTime64 and Date32 exist from 20.1 and 21.9, but hold 1900 to 2299
	// only from 22.8 (before, 1925 to 2283, clamping other values silently),
	// so ferry uses them from 22.8.
	DateTime64 bool // DateTime64(6) with the 1900-2299 range: 22.8+
	Date32     bool // Date32 with the 1900-2299 range: 22.8+
	Bool       bool // Bool: 21.12+
	// Decimal256 is Decimal(P, S) with P from 39 to 76. It left the
	// experimental settings in 21.x; ferry uses it with the other modern
	// types from 22.8 (checked on 26.7).
	Decimal256     bool // Decimal(39..76, S): 22.8+
	IsDeleted      bool // ReplacingMergeTree(ver, is_deleted): 23.2+
	LowCardinality bool // LowCardinality(String) without a setting: 19.9+ (approximately)
	RenameColumn   bool // ALTER TABLE ... RENAME COLUMN: 20.4+
	ExchangeTables bool // EXCHANGE TABLES, in Atomic databases only: 20.8+
	// ReplaceView is CREATE OR REPLACE VIEW (18.16 lacks it; from 21.8
	// at the latest). Without it a view is dropped and created again.
	ReplaceView bool // CREATE OR REPLACE VIEW: 21.8+ (approximately)
	// JSON is the JSON type, production-ready from 25.3 (Nullable(JSON)
	// from 25.2).
	JSON bool // JSON: 25.3+
}

// CapabilitiesFor returns what a server of the given version supports.
func CapabilitiesFor(major, minor int) Capabilities {
	at := func(ma, mi int) bool { return major > ma || (major == ma && minor >= mi) }
	return Capabilities{
		DateTime64:     at(22, 8),
		Date32:         at(22, 8),
		Bool:           at(21, 12),
		Decimal256:     at(22, 8),
		IsDeleted:      at(23, 2),
		LowCardinality: at(19, 9),
		RenameColumn:   at(20, 4),
		ExchangeTables: at(20, 8),
		ReplaceView:    at(21, 8),
		JSON:           at(25, 3),
	}
}
