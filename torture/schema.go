package torture

import (
	"fmt"
	"strings"
)

// keyKind is how a table is identified.
type keyKind string

const (
	keyInt       keyKind = "int"       // id bigint PRIMARY KEY
	keyText      keyKind = "text"      // id text PRIMARY KEY
	keyUUID      keyKind = "uuid"      // id uuid PRIMARY KEY
	keyComposite keyKind = "composite" // (id bigint, k2 text) PRIMARY KEY
	keyFull      keyKind = "full"      // no key, REPLICA IDENTITY FULL
	keyAppend    keyKind = "append"    // no key, --append-only
	keyPartition keyKind = "partition" // (id bigint, d date) PRIMARY KEY, PARTITION BY RANGE (d)
)

// column is one non-key column of a generated table.
type column struct {
	Name string
	Type string // a colType name
}

// table is one generated table and what the generator knows of it.
type table struct {
	Name string // unquoted; may hold odd characters
	Key  keyKind
	Cols []column
	// dateKey is the partition key's type: date, or timestamp where the
	// date key's TOAST lookup is a known bug (Size.Avoid).
	dateKey string
	nested  bool // the 2100 partition is hash-partitioned again
	// detached is the partition detached from the table, if any.
	detached string
	// nextKey hands out fresh key numbers, so inserts never collide.
	nextKey int64
	// live is the generator's guess of the keys present (concurrent
	// sessions and rollbacks make it a guess; the validators read the truth).
	live []int64
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func (t *table) q() string { return "public." + quoteIdent(t.Name) }

// keyCols are the key's column names in PostgreSQL (for full and append
// tables, the rid column that keeps rows distinct).
func (t *table) keyCols() []string {
	switch t.Key {
	case keyComposite:
		return []string{"id", "k2"}
	case keyPartition:
		return []string{"id", "d"}
	}
	return []string{"id"}
}

// hasKey reports whether the table has a primary key.
func (t *table) hasKey() bool { return t.Key != keyFull && t.Key != keyAppend }

// oddNames stay clear of '.' and ',', which would make the flags that
// name tables and columns (--append-only, --text-columns) ambiguous.
var oddNames = []string{"Mixed Case", `quote"d`, "back`tick", "ünïcode_名", "with space", "select", "dash-ed", "tab\tin"}

// genTable makes table number i of a round.
func (g *gen) genTable(i int) *table {
	r := g.r
	kinds := []keyKind{keyInt, keyText, keyUUID, keyComposite, keyFull, keyAppend, keyPartition}
	t := &table{Key: kinds[r.IntN(len(kinds))], nextKey: 1, dateKey: "date"}
	t.nested = r.IntN(2) == 0
	if g.avoid["date-key-toast"] {
		t.dateKey = "timestamp"
	}
	t.Name = fmt.Sprintf("t%d_%s", i, t.Key)
	if r.IntN(3) == 0 {
		t.Name = fmt.Sprintf("%s %d", oddNames[r.IntN(len(oddNames))], i)
	}
	n := 2 + r.IntN(6)
	plain := t.Key == keyAppend // named in a flag
	used := map[string]bool{}
	for j := 0; j < n; j++ {
		ct := g.colType()
		name := fmt.Sprintf("c%d_%s", j, ct.name)
		if r.IntN(5) == 0 && !ct.textOnModern {
			name = fmt.Sprintf("%s %d", oddNames[r.IntN(len(oddNames))], j)
		}
		if ct.textOnModern {
			plain = true
		}
		if used[name] {
			continue
		}
		used[name] = true
		t.Cols = append(t.Cols, column{Name: name, Type: ct.name})
	}
	if plain {
		t.Name = fmt.Sprintf("t%d_%s", i, t.Key)
	}
	// Every table gets one TOAST-able column, for the unchanged-TOAST paths.
	t.Cols = append(t.Cols, column{Name: "body", Type: []string{"text", "bytea", "jsonb"}[r.IntN(3)]})
	return t
}

// colType draws a new table's column type: of every type, or, in a
// Plan.BinaryTypes round, of those ferry reads in binary form (no
// interval, inet or arrays, and on a modern server none given
// --text-columns).
func (g *gen) colType() colType {
	if !g.binaryTypes {
		return types[g.r.IntN(len(types))]
	}
	var pool []colType
	for _, t := range types {
		switch {
		case t.name == "interval", t.name == "inet", strings.Contains(t.sql, "[]"), t.textOnModern && !g.legacy:
		default:
			pool = append(pool, t)
		}
	}
	return pool[g.r.IntN(len(pool))]
}

// createSQL is the DDL of the table.
func (t *table) createSQL() []string {
	var defs []string
	switch t.Key {
	case keyInt:
		defs = append(defs, "id bigint PRIMARY KEY")
	case keyText:
		defs = append(defs, "id text PRIMARY KEY")
	case keyUUID:
		defs = append(defs, "id uuid PRIMARY KEY")
	case keyComposite:
		defs = append(defs, "id bigint", "k2 text")
	case keyFull, keyAppend:
		defs = append(defs, "id bigint NOT NULL")
	case keyPartition:
		defs = append(defs, "id bigint", "d "+t.dateKey+" NOT NULL")
	}
	for _, c := range t.Cols {
		defs = append(defs, quoteIdent(c.Name)+" "+typeByName(c.Type).sql)
	}
	switch t.Key {
	case keyComposite:
		defs = append(defs, "PRIMARY KEY (id, k2)")
	case keyPartition:
		defs = append(defs, "PRIMARY KEY (id, d)")
	}
	s := []string{"CREATE TABLE " + t.q() + " (" + strings.Join(defs, ", ") + ")"}
	if t.Key == keyPartition {
		s[0] += " PARTITION BY RANGE (d)"
		for _, p := range partitionRanges {
			s = append(s, fmt.Sprintf("CREATE TABLE public.%s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')",
				quoteIdent(t.partition(p[0])), t.q(), p[0], p[1]))
			if t.nested && p[0] == "2100-01-01" {
				// A partition that is partitioned again, by hash.
				s[len(s)-1] += " PARTITION BY HASH (id)"
				for i := 0; i < 2; i++ {
					s = append(s, fmt.Sprintf("CREATE TABLE public.%s PARTITION OF public.%s FOR VALUES WITH (MODULUS 2, REMAINDER %d)",
						quoteIdent(fmt.Sprintf("%s_h%d", t.partition(p[0]), i)), quoteIdent(t.partition(p[0])), i))
				}
			}
		}
	}
	if t.Key == keyFull {
		s = append(s, "ALTER TABLE "+t.q()+" REPLICA IDENTITY FULL")
	}
	for _, c := range t.Cols {
		if typeByName(c.Type).toast {
			s = append(s, "ALTER TABLE "+t.q()+" ALTER COLUMN "+quoteIdent(c.Name)+" SET STORAGE EXTERNAL")
		}
	}
	return s
}

// keyValues renders key number k as SQL literals for the key columns.
func (t *table) keyValues(k int64) []string {
	switch t.Key {
	case keyText:
		return []string{lit(fmt.Sprintf("k%d 'é\\\"", k))}
	case keyUUID:
		return []string{lit(fmt.Sprintf("00000000-0000-4000-8000-%012x", k))}
	case keyComposite:
		return []string{fmt.Sprint(k % 7), lit(fmt.Sprintf("k%d", k))}
	case keyPartition:
		return []string{fmt.Sprint(k), lit(fmt.Sprintf("%04d-%02d-%02d", 1900+k*37%t.years(), 1+k%12, 1+k%28))}
	}
	return []string{fmt.Sprint(k)}
}

// partitionRanges are a partitioned table's range partitions.
var partitionRanges = [][2]string{{"1900-01-01", "2000-01-01"}, {"2000-01-01", "2100-01-01"}, {"2100-01-01", "2300-01-01"}}

// partition is the name of the partition that starts at from.
func (t *table) partition(from string) string { return t.Name + "_p" + from[:4] }

// years is the span of the partition key's years from 1900: to 2299, or
// to 2259 for a timestamp key while past2262 is avoided.
func (t *table) years() int64 {
	if t.dateKey == "timestamp" {
		return 360
	}
	return 400
}

// where is a WHERE clause selecting key number k.
func (t *table) where(k int64) string {
	cols, vals := t.keyCols(), t.keyValues(k)
	var parts []string
	for i := range cols {
		parts = append(parts, cols[i]+" = "+vals[i])
	}
	return strings.Join(parts, " AND ")
}

// lit quotes a string as a PostgreSQL literal.
func lit(s string) string {
	if strings.Contains(s, `\`) {
		return "E'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// typedLit renders a value (nil is NULL) for column c.
func typedLit(v *string, c column) string {
	if v == nil {
		return "NULL"
	}
	sqlType := typeByName(c.Type).sql
	if i := strings.Index(sqlType, " NOT NULL"); i >= 0 {
		sqlType = sqlType[:i]
	}
	return lit(*v) + "::" + sqlType
}

// value generates a value for c: NULL now and then unless NOT NULL.
func (g *gen) value(c column, big bool) *string {
	ct := typeByName(c.Type)
	if !strings.Contains(ct.sql, "NOT NULL") && g.r.IntN(6) == 0 {
		return nil
	}
	v := ct.gen(g.r, big && ct.toast)
	if g.legacy && c.Type == "dec38" {
		// ClickHouse 18.16's toString(Decimal128) garbles values of more
		// than 27 digits (the stored value is right, verify reads it
		// through the driver): keep the fingerprint's text exact.
		ip, fp, _ := strings.Cut(v, ".")
		if neg := strings.HasPrefix(ip, "-"); len(ip) > 21 {
			ip = ip[len(ip)-21:]
			if neg {
				ip = "-" + ip[1:]
			}
		}
		v = ip + "." + fp
	}
	if g.avoid["past2262"] && strings.HasPrefix(ct.sql, "timestamp") && len(v) > 4 && v[0] >= '0' && v[0] <= '9' && v[:4] >= "2262" {
		v = "2261" + v[4:]
	}
	return &v
}
