package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// checkShapeOf checks the shape of the table that holds tm's rows on this
// server: the table itself, or on a cluster its local table (when this
// server has one).
func (s *Sink) checkShapeOf(ctx context.Context, tm *schema.TableMap) error {
	name := tm.Name
	if s.cluster != "" {
		name = schema.LocalName(tm.Name)
		engine, err := s.tableEngine(ctx, name)
		if err != nil || engine == "" {
			return err
		}
	}
	return s.checkShape(ctx, tm, name)
}

// checkShape refuses a table ferry did not make whose engine, version or
// keys would make ClickHouse keep rows other than PostgreSQL's: a table of
// another engine adds a row for every update; ReplacingMergeTree without
// ferry's version keeps whichever row it merges last; a sorting key other
// than the table's key merges rows of different keys, or keeps the old
// version of a row beside the new one when a column of it changes; and a
// partition key over other columns does the latter too, as rows are
// replaced within a partition only. name is the table to look at: the
// table itself, or on a cluster its local table.
func (s *Sink) checkShape(ctx context.Context, tm *schema.TableMap, name string) error {
	sh, err := s.readShape(ctx, name)
	if err != nil {
		return err
	}
	why := shapeProblem(tm, sh.engine, sh.engineFull, sh.sortingKey, sh.partition)
	if why == "" {
		if differs := shapeDiffers(tm, sh); differs != "" {
			s.log.Warn("the ClickHouse table was made in another shape than the configuration gives; ferry resync makes it anew in the new one",
				zap.String("table", s.db+"."+name), zap.String("source", tm.Source.QualifiedName()), zap.String("differs", differs))
		}
		return nil
	}
	return reject(fmt.Errorf("clickhouse: table %s (for %s) is %s: %s. "+
		"Drop it to have ferry create and fill it, or create it as ENGINE = ReplacingMergeTree(%s) ORDER BY (%s), "+
		"with PARTITION BY, if any, over those columns only",
		s.table(name), tm.Source.QualifiedName(), clip(sh.engineFull, 300), why,
		schema.QuoteCH(schema.VersionColumn), quoteAll(tm.OrderByColumns())))
}

// checkMadeShape checks the table ferry has just made in the shape the
// configuration gives (whose PARTITION BY is an expression ferry does
// not parse), and drops it when the shape cannot keep the table's rows.
func (s *Sink) checkMadeShape(ctx context.Context, tm *schema.TableMap) error {
	name := tm.Name
	if s.cluster != "" {
		name = schema.LocalName(tm.Name)
	}
	sh, err := s.readShape(ctx, name)
	if err != nil {
		return err
	}
	why := shapeProblem(tm, sh.engine, sh.engineFull, sh.sortingKey, sh.partition)
	if why == "" {
		return nil
	}
	for _, n := range []string{tm.Name, schema.LocalName(tm.Name)} {
		if n == schema.LocalName(tm.Name) && s.cluster == "" {
			continue
		}
		if err := s.exec(ctx, schema.DropTableSQL(s.db, n, s.cluster), "drop table "+s.table(n)); err != nil {
			return err
		}
	}
	return reject(fmt.Errorf("clickhouse: the shape the configuration gives %s (table-shapes: %s) cannot keep its rows: %s; "+
		"change its partition_by to an expression of %s only, or remove it",
		s.table(tm.Name), tm.Source.Schema+"."+tm.Source.Name, why, strings.Join(tm.OrderByColumns(), ", ")))
}

// tableShape is what system.tables and system.columns say of a table's
// engine and keys.
type tableShape struct {
	engine, engineFull, sortingKey string
	partition                      []string // the columns the partition key uses
}

func (s *Sink) readShape(ctx context.Context, name string) (tableShape, error) {
	var sh tableShape
	err := s.conn.QueryRow(ctx, "SELECT engine, engine_full, sorting_key FROM system.tables WHERE database = "+
		schema.QuoteCHString(s.db)+" AND name = "+schema.QuoteCHString(name)).Scan(&sh.engine, &sh.engineFull, &sh.sortingKey)
	if err != nil {
		return sh, s.red.wrap(err, "clickhouse: read the engine of %s", s.table(name))
	}
	sh.partition, err = s.partitionColumns(ctx, name)
	return sh, err
}

// shapeDiffers says how a table that can keep tm's rows differs from the
// shape tm asks for: another order of the key, or a partition key where
// there is none or the other way round. "" when it does not (as far as
// ferry can tell).
func shapeDiffers(tm *schema.TableMap, sh tableShape) string {
	var have []string
	for _, e := range splitTop(sh.sortingKey) {
		have = append(have, unquoteIdent(e))
	}
	var out []string
	if want := tm.OrderByColumns(); !slices.Equal(have, want) {
		out = append(out, fmt.Sprintf("ORDER BY (%s), not (%s)", strings.Join(have, ", "), strings.Join(want, ", ")))
	}
	if (tm.Shape.PartitionBy != "") != (len(sh.partition) > 0) {
		out = append(out, "PARTITION BY "+orNone(tm.Shape.PartitionBy)+" is configured")
	}
	return strings.Join(out, "; ")
}

func orNone(e string) string {
	if e == "" {
		return "(none)"
	}
	return e
}

// partitionColumns lists the columns the table's partition key uses.
func (s *Sink) partitionColumns(ctx context.Context, name string) ([]string, error) {
	rows, err := s.conn.Query(ctx, "SELECT name FROM system.columns WHERE database = "+schema.QuoteCHString(s.db)+
		" AND table = "+schema.QuoteCHString(name)+" AND is_in_partition_key = 1")
	if err != nil {
		return nil, s.red.wrap(err, "clickhouse: read the partition key of %s", s.table(name))
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// shapeProblem says why a table of that engine and keys cannot hold tm's
// rows exactly, or "" when it can.
func shapeProblem(tm *schema.TableMap, engine, engineFull, sortingKey string, partition []string) string {
	if !strings.HasSuffix(engine, "ReplacingMergeTree") {
		return fmt.Sprintf("ferry writes an update or a delete as a new version of the row, so with engine %s every update and delete would add a row beside the old one", engine)
	}
	args := engineArgs(engineFull, engine)
	if strings.HasPrefix(engine, "Replicated") || strings.HasPrefix(engine, "Shared") {
		for len(args) > 0 && strings.HasPrefix(args[0], "'") {
			args = args[1:] // the ZooKeeper path and the replica name
		}
	}
	switch {
	case len(args) == 0:
		return fmt.Sprintf("without the version column %s, ReplacingMergeTree keeps whichever row it merges last, so a change replayed after a restart could replace a newer one", schema.VersionColumn)
	case unquoteIdent(args[0]) != schema.VersionColumn:
		return fmt.Sprintf("it is versioned by %s, not by ferry's %s", args[0], schema.VersionColumn)
	case len(args) > 1 && unquoteIdent(args[1]) != schema.DeletedColumn:
		return fmt.Sprintf("its deleted flag is %s, not ferry's %s", args[1], schema.DeletedColumn)
	}
	want := tm.OrderByColumns()
	var have []string
	for _, e := range splitTop(sortingKey) {
		have = append(have, unquoteIdent(e))
	}
	var extra, missing []string
	for _, h := range have {
		if !slices.Contains(want, h) {
			extra = append(extra, h)
		}
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			missing = append(missing, w)
		}
	}
	switch {
	case len(extra) > 0:
		return fmt.Sprintf("ORDER BY (%s) has %s beyond the key (%s): ReplacingMergeTree keeps one row per ORDER BY value, so an update that changes it would leave the old version of the row live beside the new one",
			sortingKey, strings.Join(extra, ", "), strings.Join(want, ", "))
	case len(missing) > 0:
		return fmt.Sprintf("ORDER BY (%s) lacks %s of the key (%s): ReplacingMergeTree keeps one row per ORDER BY value, so rows of different keys would be merged into one",
			sortingKey, strings.Join(missing, ", "), strings.Join(want, ", "))
	case len(have) != len(want):
		return fmt.Sprintf("ORDER BY (%s) names a key column twice", sortingKey)
	}
	if tm.Source.AppendOnly {
		return "" // rows are never replaced: any partitioning keeps them
	}
	for _, c := range partition {
		if !slices.Contains(want, c) {
			return fmt.Sprintf("its PARTITION BY uses %s, which is not in the key (%s): ReplacingMergeTree replaces a row within its partition only, so an update that moves a row to another partition would leave its old version live",
				c, strings.Join(want, ", "))
		}
	}
	return ""
}

// engineArgs splits the arguments of the engine in engine_full: those of
// "ReplacingMergeTree(ver) ORDER BY ..." are ["ver"].
func engineArgs(engineFull, engine string) []string {
	rest, ok := strings.CutPrefix(engineFull, engine)
	if !ok || !strings.HasPrefix(rest, "(") {
		return nil
	}
	depth, quote := 0, byte(0)
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '`' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return splitTop(rest[1:i])
			}
		}
	}
	return nil
}

// splitTop splits a comma-separated list of expressions at its top level,
// trimmed; an outer pair of parentheses around the whole list is dropped.
func splitTop(list string) []string {
	list = strings.TrimSpace(list)
	var out []string
	depth, quote, start := 0, byte(0), 0
	for i := 0; i < len(list); i++ {
		c := list[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '`' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(list[start:i]))
			start = i + 1
		}
	}
	if last := strings.TrimSpace(list[start:]); last != "" {
		out = append(out, last)
	}
	if len(out) == 1 && strings.HasPrefix(out[0], "(") && strings.HasSuffix(out[0], ")") && closes(out[0]) {
		return splitTop(out[0][1 : len(out[0])-1])
	}
	return out
}

// closes reports whether the parenthesis that opens e closes at its end.
func closes(e string) bool {
	depth := 0
	for i := 0; i < len(e); i++ {
		switch e[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i == len(e)-1
			}
		}
	}
	return false
}

// unquoteIdent undoes ClickHouse's quoting of an identifier (`a b`, "a").
func unquoteIdent(e string) string {
	if len(e) >= 2 && (e[0] == '`' || e[0] == '"') && e[len(e)-1] == e[0] {
		inner := e[1 : len(e)-1]
		var b strings.Builder
		for i := 0; i < len(inner); i++ {
			if inner[i] == '\\' && i+1 < len(inner) {
				i++
			}
			b.WriteByte(inner[i])
		}
		return b.String()
	}
	return e
}

func quoteAll(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = schema.QuoteCH(c)
	}
	return strings.Join(q, ", ")
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
