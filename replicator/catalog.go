package replicator

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/schema"
)

// tableRef names one table to replicate.
type tableRef struct {
	OID        uint32
	Schema     string
	Name       string
	AppendOnly bool
}

func (r tableRef) String() string { return r.Schema + "." + r.Name }

// ParseTableName splits "schema.table" (either part may be double-quoted,
// with "" for a quote) into its parts; a bare name is in schema public.
func ParseTableName(s string) (schemaName, table string, err error) {
	parts, err := splitQualified(s)
	if err != nil {
		return "", "", err
	}
	switch len(parts) {
	case 1:
		return "public", parts[0], nil
	case 2:
		return parts[0], parts[1], nil
	}
	return "", "", fmt.Errorf("table name %q: want schema.table", s)
}

// splitQualified splits a dotted name outside double quotes.
func splitQualified(s string) ([]string, error) {
	var parts []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' && quoted && i+1 < len(s) && s[i+1] == '"':
			cur.WriteByte('"')
			i++
		case c == '"':
			quoted = !quoted
		case c == '.' && !quoted:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if quoted {
		return nil, fmt.Errorf("name %q: unterminated double quote", s)
	}
	parts = append(parts, cur.String())
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("name %q: empty part", s)
		}
	}
	return parts, nil
}

// preflight checks what logical replication needs of the server and the
// role, and says how to fix each problem it finds.
func preflight(ctx context.Context, conn *pgx.Conn) error {
	var walLevel string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if walLevel != "logical" {
		return fmt.Errorf("wal_level is %q but logical replication needs 'logical': run ALTER SYSTEM SET wal_level = logical and restart PostgreSQL", walLevel)
	}
	var user string
	var canReplicate bool
	err := conn.QueryRow(ctx, `SELECT current_user, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&user, &canReplicate)
	if err != nil {
		return fmt.Errorf("read role attributes: %w", err)
	}
	if !canReplicate {
		return fmt.Errorf("role %s lacks the REPLICATION attribute: run ALTER ROLE %s REPLICATION as a superuser", schema.QuotePG(user), schema.QuotePG(user))
	}
	return nil
}

// lookupTable finds a named table.
func lookupTable(ctx context.Context, conn *pgx.Conn, schemaName, name string) (tableRef, error) {
	ref := tableRef{Schema: schemaName, Name: name}
	err := conn.QueryRow(ctx, `SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`, schemaName, name).Scan(&ref.OID)
	if err == pgx.ErrNoRows {
		return ref, fmt.Errorf("table %s does not exist: check --tables", ref)
	}
	if err != nil {
		return ref, fmt.Errorf("look up table %s: %w", ref, err)
	}
	return ref, nil
}

// userTables lists the ordinary tables of the database's user schemas.
func userTables(ctx context.Context, conn *pgx.Conn) ([]tableRef, error) {
	return queryRefs(ctx, conn, `SELECT c.oid, n.nspname, c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
		ORDER BY n.nspname, c.relname`)
}

// publicationTables lists the tables of a publication; nil if it does not exist.
func publicationTables(ctx context.Context, conn *pgx.Conn, pub string) ([]tableRef, bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, pub).Scan(&exists); err != nil {
		return nil, false, fmt.Errorf("look up publication %s: %w", pub, err)
	}
	if !exists {
		return nil, false, nil
	}
	refs, err := queryRefs(ctx, conn, `SELECT c.oid, n.nspname, c.relname FROM pg_publication_tables p
		JOIN pg_namespace n ON n.nspname = p.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
		WHERE p.pubname = $1 ORDER BY 2, 3`, pub)
	return refs, true, err
}

func queryRefs(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([]tableRef, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var refs []tableRef
	for rows.Next() {
		var r tableRef
		if err := rows.Scan(&r.OID, &r.Schema, &r.Name); err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
		refs = append(refs, r)
	}
	return refs, rows.Err()
}

// keyNullsApart marks a table whose ClickHouse rows are all still to be
// written to key NULL apart from the text \N (schema.Table.DistinctNull).
func (d *described) keyNullsApart() { d.table.DistinctNull, d.doc.DistinctNull = true, true }

// keyNullsApart is described.keyNullsApart for a table about to be copied
// into an empty ClickHouse table.
func (r *relation) keyNullsApart() { r.tm.Source.DistinctNull, r.doc.DistinctNull = true, true }

// described is a table as the catalog describes it.
type described struct {
	table      schema.Table
	ident      byte         // pg_class.relreplident: d(efault), n(othing), f(ull), i(ndex)
	typeOIDs   []uint32     // declared column types, domains not resolved
	attnums    []int        // stable across renames, so a rename is told from drop + add
	hasDefault []bool       // atthasdef: an added column's existing rows hold its default
	partitions []uint32     // a partitioned table's partitions; a change means attach or detach
	doc        catalogTable // the whole description, kept with the destination table (TableStateStore)
}

// describeTable reads a table's columns, key and replica identity.
func describeTable(ctx context.Context, conn *pgx.Conn, ref tableRef) (described, error) {
	var ct catalogTable
	if err := conn.QueryRow(ctx, "SELECT "+tableJSON+" FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1", ref.OID).Scan(&ct); err != nil {
		return described{}, fmt.Errorf("describe table %s: %w", ref, err)
	}
	return ct.described(ref.AppendOnly), nil
}

// catalogTable is the JSON document tableJSON builds; ferry's DDL trigger
// emits the same document, so the stream and the catalog describe a table
// alike.
type catalogTable struct {
	OID        uint32      `json:"oid"`
	Schema     string      `json:"schema"`
	Name       string      `json:"name"`
	Ident      string      `json:"ident"`
	Kind       string      `json:"kind"`
	Partitions []uint32    `json:"partitions"`
	Leaves     []leafState `json:"leaves"` // a partitioned table's leaf partitions (see partguard.go); nil for a plain table
	// DistinctNull: the ClickHouse rows were keyed with NULL apart from \N
	// (schema.Table.DistinctNull); absent from states stored before.
	DistinctNull bool            `json:"distinct_null,omitempty"`
	Columns      []catalogColumn `json:"columns"`
	// Copied is the relation's copyCut, kept with the stored state.
	Copied *copyCut `json:"copied,omitempty"`
	// Copying is set while a restart's copy of the table runs (copyMissing):
	// a state that still says so at the next start belongs to a copy cut
	// short, whose partial table is copied again.
	Copying bool `json:"copying,omitempty"`
	// Stale is the relation's stale flag: a restart must not take the
	// placeholders a copy left for an in-place change to build on.
	Stale bool `json:"stale,omitempty"`
	// Truncated is the relation's truncated position, kept with the
	// stored state.
	Truncated uint64 `json:"truncated,omitempty"`
	// ShapedAt is the relation's shapedAt, kept with the stored state.
	ShapedAt uint64 `json:"shaped_at,omitempty"`
	// Member is the relation's member, kept with the stored state.
	Member []string `json:"member,omitempty"`
	// Recopy is the relation's recopy, kept with the stored state: a
	// restart before the copy leaves the same updates to it.
	Recopy string `json:"recopy,omitempty"`
	// Excluded and RowFilter are the filter the ClickHouse table was made
	// under (--exclude-columns, --row-filter); Kept the attnums of the
	// publication's column list, nil when it has none (see filter.go).
	Excluded  []string `json:"excluded,omitempty"`
	RowFilter string   `json:"row_filter,omitempty"`
	Kept      []int    `json:"kept,omitempty"`
}

type catalogColumn struct {
	Attnum     int    `json:"attnum"`
	Name       string `json:"name"`
	TypID      uint32 `json:"typid"`
	TypMod     int32  `json:"typmod"`
	TypName    string `json:"typname"`  // format_type(atttypid, atttypmod)
	BaseName   string `json:"basename"` // pg_type.typname of the domain-resolved type, or of an array's element
	NotNull    bool   `json:"notnull"`
	TypType    string `json:"typtype"`
	BaseType   uint32 `json:"basetype"`
	BaseTypMod int32  `json:"basetypmod"`
	Elem       uint32 `json:"elem"`
	ElemType   string `json:"elemtype"` // "e" when the element type, or a domain's base, is an enum
	// ElemDomain is set when an array's element type is a domain; Elem,
	// ElemType and BaseName then describe the domain's base type, and
	// ElemTypMod is the domain's typmod (an array of a domain carries
	// none of its own: atttypmod is -1).
	ElemDomain bool  `json:"elemdomain,omitempty"`
	ElemTypMod int32 `json:"elemtypmod,omitempty"`
	Key        bool  `json:"key"`
	HasDefault bool  `json:"hasdef"`
	Dims       int   `json:"dims"`
}

func (ct catalogTable) ref(appendOnly bool) tableRef {
	return tableRef{OID: ct.OID, Schema: ct.Schema, Name: ct.Name, AppendOnly: appendOnly}
}

func (ct catalogTable) described(appendOnly bool) described {
	d := described{table: schema.Table{Schema: ct.Schema, Name: ct.Name, AppendOnly: appendOnly, DistinctNull: ct.DistinctNull},
		partitions: ct.Partitions, doc: ct}
	if ct.Ident != "" {
		d.ident = ct.Ident[0]
	}
	for _, cc := range ct.Columns {
		c := schema.Column{Name: cc.Name, TypeOID: cc.TypID, TypeMod: cc.TypMod, TypeName: cc.TypName,
			TypeBaseName: cc.BaseName, Dims: cc.Dims,
			NotNull: cc.NotNull, Key: cc.Key, Enum: cc.TypType == "e" || cc.ElemType == "e", ElemOID: cc.Elem}
		if cc.TypType == "d" {
			c.TypeOID, c.TypeMod = cc.BaseType, cc.BaseTypMod
		}
		if cc.ElemDomain && c.TypeMod == -1 {
			c.TypeMod = cc.ElemTypMod
		}
		d.table.Columns = append(d.table.Columns, c)
		d.typeOIDs = append(d.typeOIDs, cc.TypID)
		d.attnums = append(d.attnums, cc.Attnum)
		d.hasDefault = append(d.hasDefault, cc.HasDefault)
	}
	return d
}

// tableJSON describes the pg_class row c (joined to its pg_namespace n) as
// one JSON document: its replicated columns (pgoutput leaves out dropped
// and generated columns, and so does ferry), which of them form the key
// (the index that identifies rows for replication), and its partitions.
const tableJSON = `jsonb_build_object(
	'oid', c.oid::bigint, 'schema', n.nspname, 'name', c.relname,
	'ident', c.relreplident::text, 'kind', c.relkind::text,
	'partitions', coalesce((SELECT jsonb_agg(i.inhrelid::bigint ORDER BY i.inhrelid) FROM pg_inherits i WHERE i.inhparent = c.oid), '[]'::jsonb),
	'leaves', ` + leavesJSON + `,
	'columns', coalesce((SELECT jsonb_agg(jsonb_build_object(
		'attnum', a.attnum, 'name', a.attname, 'typid', a.atttypid::bigint, 'typmod', a.atttypmod,
		'typname', format_type(a.atttypid, a.atttypmod), 'basename', coalesce(eb.typname, bt.typname), 'notnull', a.attnotnull,
		'typtype', t.typtype::text, 'basetype', t.typbasetype::bigint, 'basetypmod', t.typtypmod,
		'elem', CASE WHEN bt.typcategory = 'A' THEN eb.oid::bigint ELSE 0 END,
		'elemtype', CASE WHEN bt.typtype = 'e' THEN 'e' ELSE coalesce(eb.typtype::text, '') END,
		'elemdomain', coalesce(et.typtype = 'd', false), 'elemtypmod', CASE WHEN et.typtype = 'd' THEN et.typtypmod ELSE 0 END,
		'key', coalesce(a.attnum = ANY((SELECT i.indkey FROM pg_index i WHERE i.indrelid = c.oid
			AND CASE c.relreplident WHEN 'i' THEN i.indisreplident ELSE i.indisprimary END LIMIT 1)::int2[]), false),
		'hasdef', a.atthasdef, 'dims', a.attndims) ORDER BY a.attnum)
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
		LEFT JOIN pg_type et ON et.oid = bt.typelem AND bt.typcategory = 'A'
		LEFT JOIN pg_type eb ON eb.oid = CASE WHEN et.typtype = 'd' THEN et.typbasetype ELSE et.oid END
		WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''), '[]'::jsonb))`

// textColumnSet parses --text-columns entries into "schema.table" → columns.
func textColumnSet(entries []string) (map[string]map[string]bool, error) {
	set := map[string]map[string]bool{}
	for _, e := range entries {
		parts, err := splitQualified(e)
		if err != nil {
			return nil, fmt.Errorf("--text-columns: %w", err)
		}
		if len(parts) == 2 {
			parts = append([]string{"public"}, parts...)
		}
		if len(parts) != 3 {
			return nil, fmt.Errorf("--text-columns entry %q: want schema.table.column", e)
		}
		key := parts[0] + "." + parts[1]
		if set[key] == nil {
			set[key] = map[string]bool{}
		}
		set[key][parts[2]] = true
	}
	return set, nil
}
