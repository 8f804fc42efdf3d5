package replicator

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// resolve decides which tables to replicate and maps each onto ClickHouse.
// firstStart allows the table list to come from the database rather than
// from an existing publication.
func (r *Replicator) resolve(ctx context.Context, conn *pgx.Conn, stored map[uint32]catalogTable) ([]*relation, error) {
	refs, err := r.tableRefs(ctx, conn)
	if err != nil {
		return nil, err
	}
	rels, err := r.relations(ctx, conn, refs, stored)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, rel := range rels {
		if other, dup := names[rel.tm.Name]; dup {
			return nil, fmt.Errorf("tables %s and %s would both become ClickHouse table %q: rename one, or replicate only one of them with --tables", other, rel.ref, rel.tm.Name)
		}
		names[rel.tm.Name] = rel.ref.String()
	}
	if len(rels) == 0 {
		return nil, fmt.Errorf("no table to replicate: name tables with --tables, or create tables with a primary key")
	}
	return rels, nil
}

// relations describes and maps tables, leaving out (with a warning) those
// PostgreSQL could not publish in full. A table with a stored description
// (the one its ClickHouse table matches) is taken as that describes it.
func (r *Replicator) relations(ctx context.Context, conn *pgx.Conn, refs []tableRef, stored map[uint32]catalogTable) ([]*relation, error) {
	var rels []*relation
	var noIdentity []string
	if r.hasFilters() {
		if err := checkFilterServer(serverMajor(conn.PgConn())); err != nil {
			return nil, err
		}
		if err := r.filtersNamed(refs); err != nil {
			return nil, err
		}
	}
	if err := r.shapesNamed(refs); err != nil {
		return nil, err
	}
	for _, ref := range refs {
		if err := canSelect(ctx, conn, ref); err != nil {
			return nil, err
		}
		d, err := describeTable(ctx, conn, ref)
		if err != nil {
			return nil, err
		}
		f := r.filterOf(ref)
		if doc, ok := stored[ref.OID]; ok {
			if why := sameFilter(doc, f); why != "" {
				return nil, fmt.Errorf("table %s: its ClickHouse table was made under another filter (%s). The slot cannot replay the table's past under a new filter: "+
					"go back to the previous --exclude-columns/--row-filter, or run ferry teardown and start again to copy every table anew", ref, why)
			}
			d = doc.described(ref.AppendOnly)
			ref.Schema, ref.Name = doc.Schema, doc.Name
		} else {
			if f != nil {
				if err := checkFilter(ctx, conn, ref, d, f); err != nil {
					return nil, err
				}
				kept := keptColumns(d, f)
				if r.publishedKept && kept != nil {
					if kept, err = r.publishedColumns(ctx, conn, ref, kept); err != nil {
						return nil, err
					}
				}
				d.restrict(kept, f.where, f.exclude)
			}
			d.keyNullsApart() // its ClickHouse rows are all still to be written
		}
		if !ref.AppendOnly && !hasIdentity(d) {
			noIdentity = append(noIdentity, ref.String())
			continue
		}
		if d.ident == 'f' && !hasKey(d.table) && !ref.AppendOnly {
			d.table.FullRow = true
			r.log.Warn("table has REPLICA IDENTITY FULL but no primary key or unique index: ClickHouse identifies its rows by all their columns, "+
				"so rows equal in every column are kept once there (ferry verify will show it); add a primary key to copy it exactly",
				zap.Stringer("table", ref))
		}
		d.table.NullAsDefault = r.cfg.NullAsDefault
		d.table.NativeJSON = r.cfg.NativeJSON
		if err := applyTextColumns(&d.table, r.textCols[ref.String()]); err != nil {
			return nil, err
		}
		tm, err := schema.Map(d.table, r.caps)
		if err != nil {
			return nil, err
		}
		if err := r.shape(tm, ref); err != nil {
			return nil, err
		}
		for _, c := range tm.Columns {
			if c.Fallback {
				r.log.Warn("no ClickHouse type for this PostgreSQL type yet: the column is replicated as String in PostgreSQL's text form",
					zap.Stringer("table", ref), zap.String("column", c.Name), zap.String("type", columnType(d.table, c.Name)))
			}
		}
		rels = append(rels, newRelation(ref, tm, d))
	}
	if len(noIdentity) > 0 {
		r.log.Warn("leaving out tables without a replica identity: PostgreSQL would reject their UPDATEs and DELETEs if they were published. "+
			"Fix: add a primary key, or ALTER TABLE ... REPLICA IDENTITY FULL, or replicate them insert-only with --append-only",
			zap.Strings("tables", noIdentity))
	}
	return rels, nil
}

// filtersNamed refuses filters of tables that are not replicated, which
// are most likely typos.
func (r *Replicator) filtersNamed(refs []tableRef) error {
	for name := range r.filters {
		if !slices.ContainsFunc(refs, func(ref tableRef) bool { return ref.String() == name }) {
			return fmt.Errorf("--exclude-columns or --row-filter names table %s, which ferry does not replicate: check the name, or add it to --tables", name)
		}
	}
	return nil
}

// shapesNamed checks that every table the configuration gives a shape is
// one ferry replicates.
func (r *Replicator) shapesNamed(refs []tableRef) error {
	for name := range r.cfg.Shapes {
		if !slices.ContainsFunc(refs, func(ref tableRef) bool { return ref.String() == name }) {
			return fmt.Errorf("the configuration's table-shapes key names table %s, which ferry does not replicate: check the name (schema.table), or add it to --tables", name)
		}
	}
	return nil
}

// shape gives a table's mapping the shape the configuration asks for.
func (r *Replicator) shape(tm *schema.TableMap, ref tableRef) error {
	sh, ok := r.cfg.Shapes[ref.String()]
	if !ok {
		return nil
	}
	return tm.SetShape(sh, "table-shapes: "+ref.String())
}

// published returns the table with this OID if one of ferry's
// publications publishes it; nil if none does.
func (r *Replicator) published(ctx context.Context, conn *pgx.Conn, oid uint32) (*tableRef, error) {
	ref := tableRef{OID: oid}
	var pub string
	err := conn.QueryRow(ctx, `SELECT p.pubname, p.schemaname, p.tablename FROM pg_publication_tables p
		JOIN pg_namespace n ON n.nspname = p.schemaname JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
		WHERE c.oid = $1 AND p.pubname IN ($2, $3) LIMIT 1`, oid, r.cfg.Publication, r.cfg.Publication+"_append").Scan(&pub, &ref.Schema, &ref.Name)
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up the publication of table %d: %w", oid, err)
	}
	ref.AppendOnly = pub != r.cfg.Publication
	return &ref, nil
}

// tableRefs lists the tables asked for: --tables, else the publication's,
// else every user table. --append-only tables are always included.
func (r *Replicator) tableRefs(ctx context.Context, conn *pgx.Conn) ([]tableRef, error) {
	appendOnly := map[string]bool{}
	var refs []tableRef
	for _, name := range r.cfg.AppendOnly {
		ref, err := r.lookup(ctx, conn, name)
		if err != nil {
			return nil, fmt.Errorf("--append-only: %w", err)
		}
		if appendOnly[ref.String()] {
			continue // named twice (a flag given twice, or the same table spelt two ways)
		}
		ref.AppendOnly = true
		appendOnly[ref.String()] = true
		refs = append(refs, ref)
	}
	var listed []tableRef
	switch {
	case len(r.cfg.Tables) > 0:
		for _, name := range r.cfg.Tables {
			ref, err := r.lookup(ctx, conn, name)
			if err != nil {
				return nil, fmt.Errorf("--tables: %w", err)
			}
			listed = append(listed, ref)
		}
	default:
		pubRefs, exists, err := publicationTables(ctx, conn, r.cfg.Publication)
		if err != nil {
			return nil, err
		}
		if exists && len(pubRefs) > 0 {
			listed = pubRefs
		} else if listed, err = userTables(ctx, conn); err != nil {
			return nil, err
		}
	}
	seen := map[uint32]bool{}
	for _, ref := range listed {
		if !appendOnly[ref.String()] && !seen[ref.OID] {
			seen[ref.OID] = true
			refs = append(refs, ref)
		}
	}
	return refs, nil
}

func (r *Replicator) lookup(ctx context.Context, conn *pgx.Conn, name string) (tableRef, error) {
	s, t, err := ParseTableName(name)
	if err != nil {
		return tableRef{}, err
	}
	return lookupTable(ctx, conn, s, t)
}

// canSelect checks that the role may read the table, which the initial copy
// and pgoutput both need.
func canSelect(ctx context.Context, conn *pgx.Conn, ref tableRef) error {
	var ok bool
	var user string
	if err := conn.QueryRow(ctx, `SELECT has_table_privilege($1::oid, 'SELECT'), current_user`, ref.OID).Scan(&ok, &user); err != nil {
		return fmt.Errorf("check privileges on %s: %w", ref, err)
	}
	if !ok {
		return fmt.Errorf("role %s may not read table %s: run GRANT SELECT ON %s TO %s", schema.QuotePG(user), ref, ref.quoted(), schema.QuotePG(user))
	}
	return nil
}

// hasIdentity reports whether PostgreSQL can publish the table's updates
// and deletes.
func hasIdentity(d described) bool {
	switch d.ident {
	case 'f':
		return true // with a key, or identified by the whole row (FullRow)
	case 'd', 'i':
		return hasKey(d.table)
	}
	return false
}

func hasKey(t schema.Table) bool {
	for _, c := range t.Columns {
		if c.Key {
			return true
		}
	}
	return false
}

func applyTextColumns(t *schema.Table, cols map[string]bool) error {
	for name := range cols {
		found := false
		for i := range t.Columns {
			if t.Columns[i].Name == name {
				t.Columns[i].Text = true
				found = true
			}
		}
		if !found {
			return fmt.Errorf("--text-columns: table %s.%s has no column %q", t.Schema, t.Name, name)
		}
	}
	return nil
}

func columnType(t schema.Table, name string) string {
	for _, c := range t.Columns {
		if c.Name == name {
			return c.TypeName
		}
	}
	return ""
}

// quotedList renders tables for a publication's table list.
func quotedList(rels []*relation, appendOnly bool) string {
	var parts []string
	for _, rel := range rels {
		if rel.ref.AppendOnly == appendOnly {
			parts = append(parts, rel.publishedAs())
		}
	}
	return strings.Join(parts, ", ")
}

// Tables resolves the tables Run would replicate, mapped for caps, without
// changing anything in PostgreSQL (ferry verify uses it).
func Tables(ctx context.Context, cfg Config, caps schema.Capabilities) ([]*schema.TableMap, error) {
	r := &Replicator{cfg: cfg.withDefaults(), caps: caps, publishedKept: true}
	r.log = r.cfg.Logger
	var err error
	if r.textCols, err = textColumnSet(r.cfg.TextColumns); err != nil {
		return nil, err
	}
	if r.filters, err = filterSet(r.cfg.ExcludeColumns, r.cfg.RowFilters); err != nil {
		return nil, err
	}
	conn, err := connect(ctx, r.cfg.ConnString)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rels, err := r.resolve(ctx, conn, nil)
	if err != nil {
		return nil, err
	}
	tms := make([]*schema.TableMap, len(rels))
	for i, rel := range rels {
		tms[i] = rel.tm
	}
	return tms, nil
}
