package clickhouse

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// Prepare creates the database and every missing table, and checks that the
// tables that exist have the columns the mappings expect. It is idempotent.
func (s *Sink) Prepare(ctx context.Context, tables []*schema.TableMap) error {
	if err := s.ensureDatabase(ctx); err != nil {
		return err
	}
	for _, tm := range tables {
		if err := s.prepareTable(ctx, tm); err != nil {
			return err
		}
		if err := s.syncView(ctx, tm); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sink) prepareTable(ctx context.Context, tm *schema.TableMap) error {
	have, err := s.columns(ctx, tm.Name)
	if err != nil {
		return err
	}
	if len(have) > 0 {
		if err := checkColumns(s.db, tm, have); err != nil {
			return err
		}
		if err := s.checkShapeOf(ctx, tm); err != nil {
			return err
		}
		return s.makeDurable(ctx, tm.Name)
	}
	if s.cluster == "" {
		if err := s.conn.Exec(ctx, tm.CreateTableDDL(s.db)); err != nil {
			return s.red.wrap(classify(err), "clickhouse: create table %s", s.table(tm.Name))
		}
	} else {
		ddl := tm.ClusterDDL(s.db, s.cluster)
		for i, name := range []string{schema.LocalName(tm.Name), tm.Name} {
			if err := s.createOnCluster(ctx, ddl[i], name); err != nil {
				return err
			}
		}
	}
	if !tm.Shape.IsZero() {
		if err := s.checkMadeShape(ctx, tm); err != nil {
			return err
		}
	}
	s.log.Info("created table", zap.String("table", tm.Name), zap.String("source", tm.Source.QualifiedName()))
	return s.makeDurable(ctx, tm.Name)
}

// columns reads a table's columns (name → type) from system.columns; an
// empty map when the table does not exist.
func (s *Sink) columns(ctx context.Context, table string) (map[string]string, error) {
	q := "SELECT name, type FROM system.columns WHERE database = " + schema.QuoteCHString(s.db) +
		" AND table = " + schema.QuoteCHString(table)
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return nil, s.red.wrap(err, "clickhouse: read columns of %s", s.table(table))
	}
	defer rows.Close()
	cols := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, s.red.wrap(err, "clickhouse: read columns of %s", s.table(table))
		}
		cols[name] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, s.red.wrap(err, "clickhouse: read columns of %s", s.table(table))
	}
	return cols, nil
}

// wantColumns is what the mapping says a table's columns are; ferry's own
// columns are checked for presence only (their type string may vary with
// the server), so they map to "".
func wantColumns(tm *schema.TableMap) map[string]string {
	want := make(map[string]string, len(tm.Columns)+4)
	for _, c := range tm.Columns {
		want[c.Name] = c.Type
	}
	for _, c := range tm.MetaColumns() {
		want[c] = ""
	}
	return want
}

// checkColumns compares a table's columns with its mapping.
func checkColumns(db string, tm *schema.TableMap, have map[string]string) error {
	diffs := columnDiffs(tm, have)
	if len(diffs) == 0 {
		return nil
	}
	return reject(fmt.Errorf("clickhouse: table %s does not match %s: %s; "+
		"drop the ClickHouse table to have ferry create and fill it anew, "+
		"or wait for schema evolution support", schema.QuoteCH(db)+"."+schema.QuoteCH(tm.Name), tm.Source.QualifiedName(), strings.Join(diffs, "; ")))
}

// ColumnDifferences reports whether the table exists and how its columns
// differ from the mapping's: columns missing or of another type, and
// columns the source table no longer has (none of either: they match).
func (s *Sink) ColumnDifferences(ctx context.Context, tm *schema.TableMap) (exists bool, diffs, extra []string, err error) {
	have, err := s.columns(ctx, tm.Name)
	if err != nil || len(have) == 0 {
		return false, nil, nil, err
	}
	for _, d := range columnDiffs(tm, have) {
		if strings.HasSuffix(d, extraColumn) {
			extra = append(extra, d)
		} else {
			diffs = append(diffs, d)
		}
	}
	return true, diffs, extra, nil
}

const extraColumn = " is not in the source table"

// columnDiffs lists, sorted, how the columns have differ from tm's.
func columnDiffs(tm *schema.TableMap, have map[string]string) []string {
	want := wantColumns(tm)
	var diffs []string
	for name, typ := range want {
		got, ok := have[name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%q is missing (want %s)", name, orAny(typ)))
		case typ != "" && normType(got) != normType(typ):
			diffs = append(diffs, fmt.Sprintf("%q is %s, want %s", name, got, typ))
		}
	}
	for name, got := range have {
		if _, ok := want[name]; !ok && name != schema.SyncedAtColumn {
			diffs = append(diffs, fmt.Sprintf("%q (%s)", name, got)+extraColumn)
		}
	}
	sort.Strings(diffs)
	return diffs
}

func orAny(typ string) string {
	if typ == "" {
		return "it"
	}
	return typ
}

// normType drops the spaces outside quotes, which ClickHouse adds or not
// depending on how the type was written ("Decimal(10,2)" is reported as
// "Decimal(10, 2)").
func normType(t string) string {
	var b strings.Builder
	var quote byte
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case quote != 0:
			b.WriteByte(c)
			if c == '\\' && i+1 < len(t) {
				i++
				b.WriteByte(t[i])
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '`' || c == '"':
			quote = c
			b.WriteByte(c)
		case c != ' ':
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Truncate removes every row of the table, for good: rows written after it
// returns are kept, and a restart of the server brings none of the old
// ones back.
//
// TRUNCATE alone does not promise the second part on every server.
// ClickHouse 18.16 takes the table's parts out of use but leaves on disk,
// for old_parts_lifetime (8 minutes), those that a merge was reading at
// the time (with more than a handful of parts, usually all of them), and a
// server restarted meanwhile loads them again: the truncated rows are
// back, while ferry has confirmed the WAL past the truncation. The server
// lists such parts, inactive, in system.parts; when any with rows is left
// the table is swapped for an empty one of the same definition, and the
// old one dropped, which removes its files at once. (26.7 leaves none.)
// On a cluster the tables are replicated, ZooKeeper keeps the list of
// their parts, and TRUNCATE ON CLUSTER is left as it is (not checked
// across a restart). With Config.SharedTables (ferry load) the swap, which
// would drop the rows another loader writes meanwhile, is left out too.
func (s *Sink) Truncate(ctx context.Context, tm *schema.TableMap) error {
	if err := s.exec(ctx, tm.TruncateSQL(s.db, s.cluster),
		fmt.Sprintf("truncate table %s", s.table(tm.Name))); err != nil {
		return err
	}
	if s.cluster != "" || s.shared {
		return nil
	}
	var left uint64
	q := "SELECT count() FROM system.parts WHERE database = " + schema.QuoteCHString(s.db) +
		" AND table = " + schema.QuoteCHString(tm.Name) + " AND rows > 0"
	if err := s.conn.QueryRow(ctx, q).Scan(&left); err != nil {
		return s.red.wrap(err, "clickhouse: look for the parts of %s that TRUNCATE left", s.table(tm.Name))
	}
	if left == 0 {
		return nil
	}
	empty := *tm
	empty.Name = tm.Name + "__ferry_empty"
	if err := s.exec(ctx, "DROP TABLE IF EXISTS "+s.table(empty.Name), "drop table "+s.table(empty.Name)); err != nil {
		return err
	}
	if err := s.exec(ctx, "CREATE TABLE "+s.table(empty.Name)+" AS "+s.table(tm.Name),
		"create an empty table like "+s.table(tm.Name)); err != nil {
		return err
	}
	s.log.Debug("TRUNCATE left parts on disk: swapping in an empty table", zap.String("table", tm.Name), zap.Uint64("parts", left))
	return s.SwapTable(ctx, tm, &empty)
}
