package clickhouse

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// resolveUnchanged returns rows with every loader.Unchanged replaced by the
// column's value: from the last earlier row of the same key in the batch,
// or, for the first row of a key, from ClickHouse. A row that moved its key
// (see movedFrom) takes the old key's value. rows itself is not modified;
// it is returned as is when it holds no Unchanged value.
//
// A batch may be a replay: ferry stopped after writing it but before
// confirming its WAL, and ClickHouse holds its rows already, maybe later
// versions of their keys too, while the versions before the batch may
// have been merged away; unchangedSource says how that is handled.
func (s *Sink) resolveUnchanged(ctx context.Context, tm *schema.TableMap, rows []loader.Row) ([]loader.Row, error) {
	first := slices.IndexFunc(rows, func(r loader.Row) bool { return hasUnchanged(r.Values) })
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
	latest, err := s.lookupUnchanged(ctx, tm, rows, keys, moved)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(rows)
	last := make(map[string]int, len(rows))
	before := map[int]int{} // a moved key's deleted row: the key's row before it, -1 when none
	for i := range out {
		if _, ok := moved[i+1]; ok {
			before[i] = -1
			if p, ok := last[keys[i]]; ok {
				before[i] = p
			}
		}
		if hasUnchanged(out[i].Values) {
			prev, hasPrev := last[keys[i]]
			oldKey := ""
			if d, ok := moved[i]; ok {
				oldKey, prev = keys[d], before[d]
				hasPrev = prev >= 0
			}
			src, ok := unchangedSource(tm, out, i, prev, hasPrev, latest[keys[i]], latest[oldKey], oldKey != "")
			if !ok {
				return nil, s.noValue(tm, out[i], i)
			}
			vals := slices.Clone(out[i].Values)
			for j, v := range vals {
				if v == loader.Unchanged {
					vals[j] = src[j]
				}
			}
			out[i].Values = vals
		}
		last[keys[i]] = i
	}
	return out, nil
}

// storedRow is the latest row of a key in ClickHouse.
type storedRow struct {
	version uint64
	deleted bool
	values  []any // indexed like tm.Columns: the key and the needed columns
}

// unchangedSource returns the row whose values replace row i's Unchanged
// ones. When ClickHouse holds the row's key at its version or later, the
// row is a replay, and the stored row's values are taken: at the same
// version they are the ones it was written with before; under a later
// version the row is superseded, and so is every later row of the batch
// that takes its values from it up to that version, for each of them finds
// the same stored row. This check comes first: the key's earlier rows in
// the batch may be superseded ones. Otherwise the values are those of the
// key's earlier row prev in the batch (hasPrev), or else of the key's
// current row in ClickHouse, which for a row that moved its key is the old
// key's. ok is false when there is none.
func unchangedSource(tm *schema.TableMap, out []loader.Row, i, prev int, hasPrev bool,
	own, old *storedRow, isMoved bool) (src []any, ok bool) {
	switch {
	case out[i].Deleted:
		return zeros(tm), true
	case own != nil && own.version >= out[i].Version:
		if own.deleted {
			return zeros(tm), true // superseded by the deletion
		}
		return own.values, true
	case hasPrev:
		return out[prev].Values, !out[prev].Deleted
	}
	if isMoved {
		own = old
	}
	if own == nil || own.deleted {
		return nil, false
	}
	return own.values, true
}

func zeros(tm *schema.TableMap) []any {
	z := make([]any, len(tm.Columns))
	for j := range z {
		z[j] = tm.Columns[j].Zero()
	}
	return z
}

func (s *Sink) noValue(tm *schema.TableMap, r loader.Row, i int) error {
	j := slices.Index(r.Values, loader.Unchanged)
	return reject(fmt.Errorf("clickhouse: write %s: no value for unchanged (TOASTed) column %q of the row with key %s: "+
		"it is neither in an earlier row of the batch nor stored in ClickHouse; "+
		"set REPLICA IDENTITY FULL on %s, or resync the table",
		s.table(tm.Name), tm.Columns[j].Name, rowKey(tm, r, i), tm.Source.QualifiedName()))
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

// lookupUnchanged reads from ClickHouse the latest row of every key with
// Unchanged values in the batch, and of the old keys of rows that moved.
// It returns them by key string, holding the needed columns.
func (s *Sink) lookupUnchanged(ctx context.Context, tm *schema.TableMap, rows []loader.Row,
	keys []string, moved map[int]int) (map[string]*storedRow, error) {
	need := make([]bool, len(tm.Columns))
	var todo []int // rows whose key to look up
	queued := map[string]bool{}
	add := func(i int) {
		if !queued[keys[i]] {
			queued[keys[i]] = true
			todo = append(todo, i)
		}
	}
	for i := range rows {
		if rows[i].Deleted || !hasUnchanged(rows[i].Values) {
			continue
		}
		add(i)
		if d, ok := moved[i]; ok {
			add(d)
		}
		for j, v := range rows[i].Values {
			if v == loader.Unchanged {
				need[j] = true
			}
		}
	}
	latest := make(map[string]*storedRow, len(todo))
	if len(todo) == 0 {
		return latest, nil
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
		if err := s.scanLatest(ctx, tm, q, cols, latest); err != nil {
			return nil, s.red.wrap(err, "clickhouse: look up unchanged (TOASTed) values in %s", s.table(tm.Name))
		}
	}
	return latest, nil
}

// scanLatest reads lookupQuery's rows into latest.
func (s *Sink) scanLatest(ctx context.Context, tm *schema.TableMap, q string, cols []int, latest map[string]*storedRow) error {
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	if len(types) != len(cols)+2 {
		return fmt.Errorf("query returned %d columns, want %d", len(types), len(cols)+2)
	}
	dest := make([]any, len(types))
	for i, t := range types {
		dest[i] = reflect.New(t.ScanType()).Interface()
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		st := &storedRow{values: make([]any, len(tm.Columns))}
		for n, j := range cols {
			if st.values[j], err = value(dest[n]); err != nil {
				return fmt.Errorf("column %q: %w", tm.Columns[j].Name, err)
			}
		}
		st.version = *dest[len(cols)].(*uint64)
		st.deleted = *dest[len(cols)+1].(*uint8) != 0
		latest[keyString(tm, st.values)] = st
	}
	return rows.Err()
}

// lookupQuery selects, for the keys of rows[todo...], the columns cols of
// each key's latest row, then that row's version and deleted flag. The
// values go through tuple() so that argMax does not skip a NULL.
func (s *Sink) lookupQuery(tm *schema.TableMap, rows []loader.Row, todo []int, cols []int) (string, error) {
	version := schema.QuoteCH(schema.VersionColumn)
	var keyList strings.Builder
	for n, k := range tm.Key {
		if n > 0 {
			keyList.WriteString(", ")
		}
		keyList.WriteString(schema.QuoteCH(tm.Columns[k].Name))
	}
	var b strings.Builder
	b.WriteString("SELECT " + keyList.String())
	for _, j := range cols[len(tm.Key):] {
		b.WriteString(", tupleElement(argMax(tuple(" + schema.QuoteCH(tm.Columns[j].Name) + "), " + version + "), 1)")
	}
	b.WriteString(", max(" + version + "), argMax(" + schema.QuoteCH(schema.DeletedColumn) + ", " + version + ")")
	b.WriteString(" FROM " + s.table(tm.Name) + " WHERE (" + keyList.String() + ") IN (")
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
	b.WriteString(") GROUP BY " + keyList.String())
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
