package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// resolveUnchanged returns rows with every loader.Unchanged replaced by the
// column's value: from the last earlier row of the same key in the batch,
// or, for the first row of a key, from ClickHouse. rows itself is not
// modified; it is returned as is when it holds no Unchanged value.
func (s *Sink) resolveUnchanged(ctx context.Context, tm *schema.TableMap, rows []loader.Row) ([]loader.Row, error) {
	first := -1
	for i := range rows {
		if hasUnchanged(rows[i].Values) {
			first = i
			break
		}
	}
	if first < 0 {
		return rows, nil
	}
	name := s.table(tm.Name)
	if len(tm.Key) == 0 {
		return nil, reject(fmt.Errorf("clickhouse: write %s: row %d has an unchanged (TOASTed) value, "+
			"but the table has no key to find its current value by; "+
			"set REPLICA IDENTITY FULL on %s", name, first, tm.Source.QualifiedName()))
	}
	for _, k := range tm.Key {
		for i := range rows {
			if rows[i].Values[k] == loader.Unchanged {
				return nil, reject(fmt.Errorf("clickhouse: write %s: key column %q of row %d is unchanged (TOASTed)",
					name, tm.Columns[k].Name, i))
			}
		}
	}
	keys := make([]string, len(rows))
	for i := range rows {
		keys[i] = keyString(tm, rows[i].Values)
	}
	moved := movedFrom(rows, keys)
	stored, err := s.lookupUnchanged(ctx, tm, rows, keys, moved)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(rows)
	last := make(map[string]int, len(rows))
	before := map[int]int{} // a moved key's deleted row: the key's row before it, -1 when none
	for i := range out {
		if _, ok := moved[i+1]; ok {
			p, ok := last[keys[i]]
			if !ok {
				p = -1
			}
			before[i] = p
		}
		r := &out[i]
		if hasUnchanged(r.Values) {
			src := keys[i]
			prev, hasPrev := last[src]
			if d, ok := moved[i]; ok {
				src, prev = keys[d], before[d]
				hasPrev = prev >= 0
			}
			vals := slices.Clone(r.Values)
			for j, v := range vals {
				if v != loader.Unchanged {
					continue
				}
				if vals[j], err = s.unchangedValue(tm, out, prev, hasPrev, stored[src], i, j); err != nil {
					return nil, err
				}
			}
			r.Values = vals
		}
		last[keys[i]] = i
	}
	return out, nil
}

// movedFrom finds the rows of updates that changed the key: the replicator
// sends such an update as the old key's deleted row followed at once by
// the new row, both with the change's version. Their Unchanged values are
// the old key's, so the map gives, for each such row, the index of the
// deleted row before it.
func movedFrom(rows []loader.Row, keys []string) map[int]int {
	var moved map[int]int
	for i := 1; i < len(rows); i++ {
		p := &rows[i-1]
		if p.Deleted && !rows[i].Deleted && p.Version == rows[i].Version && keys[i-1] != keys[i] &&
			hasUnchanged(rows[i].Values) {
			if moved == nil {
				moved = map[int]int{}
			}
			moved[i] = i - 1
		}
	}
	return moved
}

// unchangedValue finds the value of column j for row i of out: from the
// earlier row prev of the same key (hasPrev), or else from stored, the
// key's row in ClickHouse (nil when there is none).
func (s *Sink) unchangedValue(tm *schema.TableMap, out []loader.Row, prev int, hasPrev bool,
	stored []any, i, j int) (any, error) {
	if out[i].Deleted {
		return tm.Columns[j].Zero(), nil
	}
	if hasPrev {
		if !out[prev].Deleted {
			return out[prev].Values[j], nil
		}
	} else if stored != nil {
		return stored[j], nil
	}
	return nil, reject(fmt.Errorf("clickhouse: write %s: no value for unchanged (TOASTed) column %q of the row with key %s: "+
		"it is neither in an earlier row of the batch nor stored in ClickHouse; "+
		"set REPLICA IDENTITY FULL on %s, or resync the table",
		s.table(tm.Name), tm.Columns[j].Name, rowKey(tm, out[i], i), tm.Source.QualifiedName()))
}

// lookupUnchanged reads from ClickHouse the stored values of the keys whose
// first row in the batch is needed for Unchanged values: that of a row
// with Unchanged values, or for a row that moved to a new key, the old
// key's. It returns, by key string, a row of values indexed like
// tm.Columns, holding the needed columns.
func (s *Sink) lookupUnchanged(ctx context.Context, tm *schema.TableMap, rows []loader.Row,
	keys []string, moved map[int]int) (map[string][]any, error) {
	first := make(map[string]int, len(rows))
	for i := len(rows) - 1; i >= 0; i-- {
		first[keys[i]] = i
	}
	need := make([]bool, len(tm.Columns))
	var todo []int // rows whose key to look up
	queued := map[int]bool{}
	for i := range rows {
		if rows[i].Deleted || !hasUnchanged(rows[i].Values) {
			continue
		}
		src := i
		if d, ok := moved[i]; ok {
			src = d
		}
		if first[keys[src]] != src || queued[src] {
			continue
		}
		queued[src] = true
		todo = append(todo, src)
		for j, v := range rows[i].Values {
			if v == loader.Unchanged {
				need[j] = true
			}
		}
	}
	stored := make(map[string][]any, len(todo))
	if len(todo) == 0 {
		return stored, nil
	}
	cols := slices.Clone(tm.Key)
	for j, n := range need {
		if n {
			cols = append(cols, j)
		}
	}
	for start := 0; start < len(todo); start += s.chunk {
		end := min(start+s.chunk, len(todo))
		q, err := s.lookupQuery(tm, rows, todo[start:end], cols)
		if err != nil {
			return nil, err
		}
		err = s.scan(ctx, tm, q, cols, func(vals []any) error {
			row := make([]any, len(tm.Columns))
			for n, j := range cols {
				row[j] = vals[n]
			}
			stored[keyString(tm, row)] = row
			return nil
		})
		if err != nil {
			return nil, s.red.wrap(err, "clickhouse: look up unchanged (TOASTed) values in %s", s.table(tm.Name))
		}
	}
	return stored, nil
}

// lookupQuery selects the columns cols of the live rows with the keys of
// rows[todo...].
func (s *Sink) lookupQuery(tm *schema.TableMap, rows []loader.Row, todo []int, cols []int) (string, error) {
	var b strings.Builder
	b.WriteString("SELECT ")
	for n, j := range cols {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(schema.QuoteCH(tm.Columns[j].Name))
	}
	b.WriteString(" FROM " + s.table(tm.Name) + " FINAL WHERE " + schema.QuoteCH(schema.DeletedColumn) + " = 0 AND (")
	for n, k := range tm.Key {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(schema.QuoteCH(tm.Columns[k].Name))
	}
	b.WriteString(") IN (")
	for n, i := range todo {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for m, k := range tm.Key {
			if m > 0 {
				b.WriteString(", ")
			}
			lit, err := schema.Literal(rows[i].Values[k])
			if err != nil {
				return "", reject(fmt.Errorf("clickhouse: look up unchanged values in %s: key column %q: %w",
					s.table(tm.Name), tm.Columns[k].Name, err))
			}
			b.WriteString(lit)
		}
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String(), nil
}

// keyString identifies a row's key: its key values in canonical form,
// each prefixed with its length so that no two keys run together.
func keyString(tm *schema.TableMap, vals []any) string {
	var b strings.Builder
	for _, k := range tm.Key {
		c := schema.Canonical(vals[k])
		b.WriteString(strconv.Itoa(len(c)))
		b.WriteByte(':')
		b.WriteString(c)
	}
	return b.String()
}

func hasUnchanged(vals []any) bool {
	for _, v := range vals {
		if v == loader.Unchanged {
			return true
		}
	}
	return false
}
