package replicator

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/schema"
)

// minPostgresFilter is the first PostgreSQL whose publications take column
// lists and row filters. ferry filters nowhere else: filtering in ferry
// would still ship every excluded value and row over the wire.
const minPostgresFilter = 15

// tableFilter is what ferry replicates of one table (--exclude-columns,
// --row-filter).
type tableFilter struct {
	exclude []string // column names, sorted
	where   string   // the row condition, without WHERE; "" for every row
}

// filterSet parses --exclude-columns ("schema.table.column") and
// --row-filter ("schema.table:WHERE condition") into filters by
// "schema.table".
func filterSet(exclude, rowFilters []string) (map[string]*tableFilter, error) {
	set := map[string]*tableFilter{}
	get := func(key string) *tableFilter {
		if set[key] == nil {
			set[key] = &tableFilter{}
		}
		return set[key]
	}
	for _, e := range exclude {
		parts, err := splitQualified(strings.TrimSpace(e))
		if err != nil {
			return nil, fmt.Errorf("--exclude-columns: %w", err)
		}
		if len(parts) == 2 {
			parts = append([]string{"public"}, parts...)
		}
		if len(parts) != 3 {
			return nil, fmt.Errorf("--exclude-columns entry %q: want schema.table.column", e)
		}
		f := get(parts[0] + "." + parts[1])
		if !slices.Contains(f.exclude, parts[2]) {
			f.exclude = append(f.exclude, parts[2])
		}
	}
	for _, e := range rowFilters {
		table, cond, err := splitRowFilter(e)
		if err != nil {
			return nil, err
		}
		s, t, err := ParseTableName(table)
		if err != nil {
			return nil, fmt.Errorf("--row-filter %q: %w", e, err)
		}
		f := get(s + "." + t)
		if f.where != "" {
			return nil, fmt.Errorf("--row-filter: two filters for table %s.%s: join them with AND in one", s, t)
		}
		f.where = cond
	}
	for _, f := range set {
		sort.Strings(f.exclude)
	}
	return set, nil
}

// splitRowFilter splits "schema.table:WHERE condition" at the first colon
// outside double quotes; the WHERE is optional.
func splitRowFilter(e string) (table, cond string, err error) {
	quoted := false
	for i := 0; i < len(e); i++ {
		switch {
		case e[i] == '"':
			quoted = !quoted
		case e[i] == ':' && !quoted:
			table, cond = strings.TrimSpace(e[:i]), strings.TrimSpace(e[i+1:])
			if strings.EqualFold(cond, "where") {
				cond = ""
			} else if len(cond) > 5 && strings.EqualFold(cond[:5], "where") && strings.ContainsRune(" \t\n(", rune(cond[5])) {
				cond = strings.TrimSpace(cond[5:])
			}
			if cond == "" {
				return "", "", fmt.Errorf("--row-filter %q: no condition after the colon", e)
			}
			return table, cond, nil
		}
	}
	return "", "", fmt.Errorf("--row-filter %q: want schema.table:WHERE condition", e)
}

// hasFilters reports whether any table is filtered.
func (r *Replicator) hasFilters() bool { return len(r.filters) > 0 }

// checkFilterServer refuses filters where publications cannot apply them.
func checkFilterServer(major int) error {
	if major != 0 && major < minPostgresFilter {
		return fmt.Errorf("--exclude-columns and --row-filter need PostgreSQL %d or later (publication column lists and row filters); the server is PostgreSQL %d. "+
			"ferry does not filter on its side, as the excluded data would still leave PostgreSQL: drop the settings, or replicate from PostgreSQL %d+",
			minPostgresFilter, major, minPostgresFilter)
	}
	return nil
}

// checkFilter refuses a filter that PostgreSQL would reject, or under
// which ferry could not keep the ClickHouse table exact, naming the fix.
// d is the table's unfiltered description.
func checkFilter(ctx context.Context, conn *pgx.Conn, ref tableRef, d described, f *tableFilter) error {
	for _, name := range f.exclude {
		i := slices.IndexFunc(d.table.Columns, func(c schema.Column) bool { return c.Name == name })
		switch {
		case i < 0:
			return fmt.Errorf("--exclude-columns: table %s has no column %q (generated and dropped columns are never replicated)", ref, name)
		case ref.AppendOnly:
		case d.table.Columns[i].Key:
			return fmt.Errorf("--exclude-columns: column %q of table %s is part of its replica identity (the key ClickHouse rows are identified by); "+
				"PostgreSQL requires a publication's column list to include it, so it cannot be excluded: keep the column, or replicate the table with --append-only", name, ref)
		case d.ident == 'f':
			return fmt.Errorf("--exclude-columns: table %s has REPLICA IDENTITY FULL, so every column is part of its replica identity and PostgreSQL would refuse "+
				"its UPDATEs and DELETEs under a column list: set a primary key or REPLICA IDENTITY USING INDEX, or replicate it with --append-only", ref)
		}
	}
	if len(f.exclude) == len(d.table.Columns) {
		return fmt.Errorf("--exclude-columns: every column of table %s is excluded: leave the table out of --tables instead", ref)
	}
	if f.where == "" {
		return nil
	}
	cols, err := filterColumns(ctx, conn, ref, f.where)
	if err != nil {
		return err
	}
	if ref.AppendOnly || d.ident == 'f' {
		return nil
	}
	for _, name := range cols {
		i := slices.IndexFunc(d.table.Columns, func(c schema.Column) bool { return c.Name == name })
		if i < 0 || !d.table.Columns[i].Key {
			return fmt.Errorf("--row-filter of table %s (WHERE %s) uses column %q, which is not part of the table's replica identity: PostgreSQL would then refuse "+
				"every UPDATE and DELETE of the table (a row filter of a publication that publishes them may use only replica identity columns). "+
				"Fix: filter on key columns only, or ALTER TABLE %s REPLICA IDENTITY FULL, or replicate the table with --append-only", ref, f.where, name, ref.quoted())
		}
	}
	return nil
}

// filterColumns lists the columns a row condition reads, as PostgreSQL
// resolves it: it defines a temporary view with the condition, reads the
// view's column dependencies and rolls everything back. A bad condition
// fails here with PostgreSQL's error, before any publication changes.
func filterColumns(ctx context.Context, conn *pgx.Conn, ref tableRef, where string) ([]string, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("check --row-filter of %s: %w", ref, err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // rolled back on purpose
	if _, err := tx.Exec(ctx, "CREATE TEMPORARY VIEW ferry_row_filter_check AS SELECT FROM "+ref.quoted()+" WHERE ("+where+")"); err != nil {
		return nil, fmt.Errorf("--row-filter of table %s: WHERE %s: %w", ref, where, err)
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT a.attname FROM pg_depend d
		JOIN pg_rewrite w ON w.oid = d.objid AND d.classid = 'pg_rewrite'::regclass
		JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
		WHERE w.ev_class = 'pg_temp.ferry_row_filter_check'::regclass AND d.refobjid = $1 AND d.refobjsubid > 0 ORDER BY 1`, ref.OID)
	if err != nil {
		return nil, fmt.Errorf("check --row-filter of %s: %w", ref, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("check --row-filter of %s: %w", ref, err)
	}
	return names, nil
}

// restrict narrows a description to what the publication sends: the
// columns kept (by attnum; a column that comes from a Relation message,
// attnum 0, is published by definition) and the row filter. Columns added
// to the table after its column list was set are not in the list, so they
// stay out.
func (d *described) restrict(kept []int, where string, excluded []string) {
	d.table.RowFilter = where
	d.doc.RowFilter, d.doc.Excluded, d.doc.Kept = where, excluded, kept
	if kept == nil {
		return
	}
	var cols []schema.Column
	var oids []uint32
	var attnums []int
	var hasDef []bool
	for i, c := range d.table.Columns {
		if d.attnums[i] > 0 && !slices.Contains(kept, d.attnums[i]) {
			continue
		}
		cols = append(cols, c)
		oids = append(oids, d.typeOIDs[i])
		attnums = append(attnums, d.attnums[i])
		hasDef = append(hasDef, d.hasDefault[i])
	}
	d.table.Columns, d.typeOIDs, d.attnums, d.hasDefault = cols, oids, attnums, hasDef
	var docCols []catalogColumn
	for _, c := range d.doc.Columns {
		if c.Attnum <= 0 || slices.Contains(kept, c.Attnum) {
			docCols = append(docCols, c)
		}
	}
	d.doc.Columns = docCols
}

// keptColumns is the attnums of the columns a filter keeps; nil when it
// excludes none (the publication then has no column list).
func keptColumns(d described, f *tableFilter) []int {
	if f == nil || len(f.exclude) == 0 {
		return nil
	}
	var kept []int
	for i, c := range d.table.Columns {
		if !slices.Contains(f.exclude, c.Name) {
			kept = append(kept, d.attnums[i])
		}
	}
	return kept
}

// filterOf is the configured filter of a table; nil for none.
func (r *Replicator) filterOf(ref tableRef) *tableFilter { return r.filters[ref.String()] }

// sameFilter tells whether a stored description was filtered as the
// configuration says now; if not, why.
func sameFilter(doc catalogTable, f *tableFilter) string {
	var exclude []string
	var where string
	if f != nil {
		exclude, where = f.exclude, f.where
	}
	var diffs []string
	if !slices.Equal(doc.Excluded, exclude) {
		diffs = append(diffs, fmt.Sprintf("excluded columns were %s, now %s", listOrNone(doc.Excluded), listOrNone(exclude)))
	}
	if doc.RowFilter != where {
		diffs = append(diffs, fmt.Sprintf("row filter was %s, now %s", condOrNone(doc.RowFilter), condOrNone(where)))
	}
	return strings.Join(diffs, "; ")
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

func condOrNone(c string) string {
	if c == "" {
		return "none"
	}
	return "WHERE " + c
}

// publishedAs is the table as a publication lists it: with its column
// list and row filter, if any.
func (rel *relation) publishedAs() string {
	s := rel.ref.quoted()
	if rel.doc.Kept != nil {
		names := make([]string, len(rel.tm.Source.Columns))
		for i, c := range rel.tm.Source.Columns {
			names[i] = schema.QuotePG(c.Name)
		}
		s += " (" + strings.Join(names, ", ") + ")"
	}
	if rel.tm.Source.RowFilter != "" {
		s += " WHERE (" + rel.tm.Source.RowFilter + ")"
	}
	return s
}

// publicationFiltered reports whether a publication filters any table's
// columns or rows (PostgreSQL 15 and later; false before).
func publicationFiltered(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	if serverMajor(conn.PgConn()) < minPostgresFilter {
		return false, nil
	}
	var filtered bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
		WHERE p.pubname = $1 AND (r.prqual IS NOT NULL OR r.prattrs IS NOT NULL))`, name).Scan(&filtered)
	if err != nil {
		return false, fmt.Errorf("look up the filters of publication %s: %w", name, err)
	}
	return filtered, nil
}

// anyFiltered reports whether a relation of the publication is filtered.
func anyFiltered(rels []*relation, appendOnly bool) bool {
	for _, rel := range rels {
		if rel.ref.AppendOnly == appendOnly && (rel.doc.Kept != nil || rel.tm.Source.RowFilter != "") {
			return true
		}
	}
	return false
}

// publishedColumns narrows kept to the columns of the table's column list
// in ferry's publications, which lacks those added to the table after the
// list was set; kept as it is when no publication lists the table.
func (r *Replicator) publishedColumns(ctx context.Context, conn *pgx.Conn, ref tableRef, kept []int) ([]int, error) {
	var attrs []int16
	err := conn.QueryRow(ctx, `SELECT r.prattrs::int2[] FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
		WHERE p.pubname IN ($1, $2) AND r.prrelid = $3 AND r.prattrs IS NOT NULL LIMIT 1`,
		r.cfg.Publication, r.cfg.Publication+"_append", ref.OID).Scan(&attrs)
	if err == pgx.ErrNoRows {
		return kept, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up the column list of %s: %w", ref, err)
	}
	var out []int
	for _, a := range kept {
		if slices.Contains(attrs, int16(a)) {
			out = append(out, a)
		}
	}
	return out, nil
}
