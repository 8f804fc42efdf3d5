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
// column's value: from the key's latest earlier version, which is an
// earlier row of the batch or the row stored in ClickHouse, whichever has
// the higher version below the row's. A row that moved its key (see
// movedFrom) takes the old key's value from before the move. rows itself
// is not modified; it is returned as is when it holds no Unchanged value.
//
// A batch may be a replay: ferry stopped after writing it but before
// confirming its WAL, and ClickHouse holds its rows already, maybe later
// versions of their keys too, while the versions before the batch may
// have been merged away; unchangedSource says how that is handled.
//
// A deleted row with Unchanged values is a carrier (see movedFrom): it is
// written with the values resolved, not zeros, so that the new key's row of
// a key change, which may come in a later batch, finds them.
func (s *Sink) resolveUnchanged(ctx context.Context, tm *schema.TableMap, rows []loader.Row) ([]loader.Row, error) {
	first := slices.IndexFunc(rows, func(r loader.Row) bool { return loader.HasUnchanged(r.Values) })
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
	h := history{rows: out, byKey: make(map[string][]int, len(rows)), moved: moved}
	for i := range out {
		if loader.HasUnchanged(out[i].Values) {
			src, ok := h.source(tm, i, keys, latest)
			if d, moved := moved[i]; !ok && moved && out[i].Deleted {
				return nil, s.noCarried(tm, out, i, d)
			}
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
		h.add(keys[i], i)
	}
	return out, nil
}

// storedRow is the latest row of a key in ClickHouse.
type storedRow struct {
	version uint64
	deleted bool
	values  []any // indexed like tm.Columns: the key and the needed columns
}

// history holds, by key, the indices of the batch's rows resolved so far,
// in version order. In a batch from the replicator that is batch order;
// the Kafka loader adds carriers from another partition's stream, which
// may come before rows of their key with lower versions.
type history struct {
	rows  []loader.Row
	byKey map[string][]int
	moved map[int]int // see movedFrom
}

func (h *history) add(key string, i int) {
	l := h.byKey[key]
	v := h.rows[i].Version
	n := len(l)
	for n > 0 && h.rows[l[n-1]].Version > v {
		n--
	}
	h.byKey[key] = slices.Insert(l, n, i)
}

// before is the key's row with the highest version below v, -1 if none.
func (h *history) before(key string, v uint64) int {
	l := h.byKey[key]
	for n := len(l) - 1; n >= 0; n-- {
		if h.rows[l[n]].Version < v {
			return l[n]
		}
	}
	return -1
}

// source returns the values that replace row i's Unchanged ones; ok is
// false when there are none.
//
// When ClickHouse holds the row's key at its version or later, the row is
// a replay, and the stored row's values are taken: at the same version
// they are the ones it was written with before; under a later version the
// row is superseded, and so is every later row of the batch that takes its
// values from it up to that version, for each of them finds the same
// stored row. This check comes first: the key's earlier rows in the batch
// may be superseded ones.
//
// Otherwise the values are those of the key's latest version below the
// row's, from the batch or ClickHouse; for a row that moved its key, of the
// old key's latest version below its delete. A deleted version has no
// values, except a carrier: the version just below a key change's, which
// holds the old key's values for the new key.
func (h *history) source(tm *schema.TableMap, i int, keys []string, latest map[string]*storedRow) (src []any, ok bool) {
	r := &h.rows[i]
	d, isMoved := h.moved[i]
	if r.Deleted && !isMoved {
		return zeros(tm), true
	}
	if own := latest[keys[i]]; own != nil && own.version >= r.Version {
		if own.deleted && !(r.Deleted && own.version == r.Version) {
			return zeros(tm), true // superseded by the deletion
		}
		return own.values, true
	}
	if isMoved && !r.Deleted {
		// Through Kafka the carrier may be there while the old key's
		// version before its delete is not (another loader wrote the
		// delete already).
		if src, ok := h.latestBelow(keys[i], r.Version, latest); ok {
			return src, true
		}
	}
	if isMoved {
		return h.latestBelow(keys[d], h.rows[d].Version, latest)
	}
	return h.latestBelow(keys[i], r.Version, latest)
}

// latestBelow returns the values of the key's latest version below v, from
// the batch or ClickHouse, whichever is higher; ok is false when there is
// none, or it is deleted. A carrier, the deleted version just below v, has
// the values of v's old key.
func (h *history) latestBelow(key string, v uint64, latest map[string]*storedRow) (src []any, ok bool) {
	prev := h.before(key, v)
	if st := latest[key]; st != nil && st.version < v && (prev < 0 || st.version > h.rows[prev].Version) {
		return st.values, !st.deleted || st.version+1 == v
	}
	if prev < 0 {
		return nil, false
	}
	p := &h.rows[prev]
	_, carrier := h.moved[prev]
	return p.Values, !p.Deleted || (carrier && p.Version+1 == v)
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
	return reject(fmt.Errorf("clickhouse: write %s: %w %q of the row with key %s: "+
		"it is neither in an earlier row of the batch nor stored in ClickHouse; "+
		"set REPLICA IDENTITY FULL on %s, or resync the table",
		s.table(tm.Name), loader.ErrNoUnchangedValue, tm.Columns[j].Name, rowKey(tm, r, i), tm.Source.QualifiedName()))
}

// ResolvesUnchanged marks the sink as a loader.UnchangedResolver.
func (s *Sink) ResolvesUnchanged() {}

// noCarried is noValue for a carrier (see movedFrom).
func (s *Sink) noCarried(tm *schema.TableMap, out []loader.Row, i, d int) error {
	j := slices.Index(out[i].Values, loader.Unchanged)
	return reject(fmt.Errorf("clickhouse: write %s: %w %q to carry from key %s to key %s "+
		"(an update that changed the key, through Kafka): the old key's row before the change is neither in the batch "+
		"nor stored in ClickHouse; set REPLICA IDENTITY FULL on %s, or resync the table",
		s.table(tm.Name), loader.ErrNoUnchangedValue, tm.Columns[j].Name, rowKey(tm, out[d], d), rowKey(tm, out[i], i), tm.Source.QualifiedName()))
}

// movedFrom finds the rows whose Unchanged values are another key's, and
// gives for each the index of that key's deleted row:
//
//   - The replicator sends an update that changed the key as the old key's
//     deleted row followed at once by the new row, both with the change's
//     version. The new row's Unchanged values are the old key's.
//   - The Kafka loader cannot keep those two together: they come from the
//     partitions of their keys. With the old key's deleted row it sends a
//     carrier just before it: a deleted row of the new key, one version
//     below the change, all its other columns Unchanged. It is written with
//     the old key's values, and the new row, whenever it comes, takes them
//     as those of its key's previous version. (No change has a version one
//     below another's: versions are WAL positions of records longer than
//     one byte.)
func movedFrom(rows []loader.Row, keys []string) map[int]int {
	moved := map[int]int{}
	for i := 1; i < len(rows); i++ {
		p, r := &rows[i-1], &rows[i]
		if !p.Deleted || keys[i-1] == keys[i] {
			continue
		}
		switch {
		case !r.Deleted && p.Version == r.Version && loader.HasUnchanged(r.Values):
			moved[i] = i - 1
		case r.Deleted && p.Version+1 == r.Version && loader.HasUnchanged(p.Values):
			moved[i-1] = i
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
		if _, carrier := moved[i]; !loader.HasUnchanged(rows[i].Values) || (rows[i].Deleted && !carrier) {
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
			st.values[j] = carried(tm.Columns[j], fromRead(tm.Columns[j], st.values[j]))
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
	b.WriteString("SELECT ")
	for n, k := range tm.Key {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(readSelect(tm.Columns[k], schema.QuoteCH(tm.Columns[k].Name)))
	}
	for _, j := range cols[len(tm.Key):] {
		b.WriteString(", " + readSelect(tm.Columns[j], "tupleElement(argMax(tuple("+schema.QuoteCH(tm.Columns[j].Name)+"), "+version+"), 1)"))
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
			if strings.Contains(tm.Columns[k].Type, "Date32") {
				// A date is a time.Time, whose literal is a DateTime64; the
				// IN list wants the key column's own type.
				lit = "toDate32(" + lit + ")"
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

// KeyVersion returns the version of the latest row stored for the key in
// vals (indexed like tm.Columns; only the key columns are read); found is
// false when ClickHouse holds none. The Kafka loader asks it whether the
// carrier of a key change (see movedFrom) is stored yet.
func (s *Sink) KeyVersion(ctx context.Context, tm *schema.TableMap, vals []any) (version uint64, found bool, err error) {
	if len(tm.Key) == 0 {
		return 0, false, fmt.Errorf("clickhouse: table %s has no key", s.table(tm.Name))
	}
	rows := []loader.Row{{Values: vals}}
	q, err := s.lookupQuery(tm, rows, []int{0}, tm.Key)
	if err != nil {
		return 0, false, err
	}
	latest := map[string]*storedRow{}
	if err := s.scanLatest(ctx, tm, q, tm.Key, latest); err != nil {
		return 0, false, s.red.wrap(err, "clickhouse: read the version of a key of %s", s.table(tm.Name))
	}
	st := latest[keyString(tm, vals)]
	if st == nil {
		return 0, false, nil
	}
	return st.version, true, nil
}
