package verify

import (
	"context"
	"fmt"
	"hash/maphash"
	"sort"
	"strconv"
	"strings"

	"github.com/ferry-cdc/ferry/schema"
)

// Scanner streams a table's live rows; fn must not keep the slice.
type Scanner func(ctx context.Context, tm *schema.TableMap, fn func(values []any) error) error

// ColumnScanner streams a table's live rows, giving fn the values of the
// columns cols (indexes into tm.Columns) in that order; fn must not keep
// the slice.
type ColumnScanner func(ctx context.Context, tm *schema.TableMap, cols []int, fn func(values []any) error) error

// Config bounds the work. The zero value means the defaults.
type Config struct {
	// Buckets is how many key-hash buckets the checksums use. Default 4096.
	Buckets int
	// MaxDiffs is how many differing keys a Result names. Default 10.
	MaxDiffs int
	// DestColumns is how many columns besides the key one scan of the
	// destination reads: a wider table is read in groups of columns, one
	// scan each. ClickHouse's FINAL holds a read buffer for every column of
	// every unmerged part at once, so this is what bounds its memory.
	// Default 0: all columns in one scan.
	DestColumns int
}

// Result is one table's comparison.
type Result struct {
	Table       string // PostgreSQL schema.table
	SourceRows  uint64
	DestRows    uint64
	Match       bool
	Differences []Difference // at most Config.MaxDiffs, in key order
}

// Difference is one key whose row is not the same on both sides.
type Difference struct {
	Key    string // the key columns as name=value
	Source string // the row in PostgreSQL, "" when missing
	Dest   string // the row in ClickHouse, "" when missing
}

func (d Difference) String() string {
	switch {
	case d.Source == "":
		return d.Key + ": only in ClickHouse"
	case d.Dest == "":
		return d.Key + ": missing from ClickHouse"
	}
	return fmt.Sprintf("%s: PostgreSQL %s, ClickHouse %s", d.Key, d.Source, d.Dest)
}

type bucket struct {
	rows uint64
	sum  uint64
}

// Table compares one table read by source (PostgreSQL) and dest (ClickHouse).
func Table(ctx context.Context, tm *schema.TableMap, source Scanner, dest ColumnScanner, cfg Config) (Result, error) {
	if cfg.Buckets <= 0 {
		cfg.Buckets = 4096
	}
	if cfg.MaxDiffs <= 0 {
		cfg.MaxDiffs = 10
	}
	res := Result{Table: tm.Source.Schema + "." + tm.Source.Name}
	h := newHasher(tm, cfg.Buckets, cfg.DestColumns)
	src, err := h.sourceSums(ctx, tm, source, &res.SourceRows)
	if err != nil {
		return res, fmt.Errorf("verify %s in PostgreSQL: %w", res.Table, err)
	}
	dst, err := h.destSums(ctx, tm, dest, &res.DestRows)
	if err != nil {
		return res, fmt.Errorf("verify %s in ClickHouse: %w", res.Table, err)
	}
	var differing map[int]bool
	for i := range src {
		if src[i] != dst[i] {
			if differing == nil {
				differing = map[int]bool{}
			}
			differing[i] = true
			if len(differing) >= 8 {
				break // enough to name the first differing keys
			}
		}
	}
	res.Match = differing == nil
	if res.Match {
		return res, nil
	}
	res.Differences, err = h.diff(ctx, tm, source, dest, differing, cfg.MaxDiffs)
	if err != nil {
		return res, fmt.Errorf("verify %s: %w", res.Table, err)
	}
	return res, nil
}

// hasher turns rows into bucket numbers and row hashes. A row's hash is
// the sum of one hash per group of columns (each over the key and the
// group), so that the destination, read one group at a time, sums to the
// same as the source, read whole.
type hasher struct {
	seed    maphash.Seed
	buckets int
	key     []int
	groups  [][]int // the other columns, as the destination is read
}

func newHasher(tm *schema.TableMap, buckets, width int) *hasher {
	key := tm.Key
	if len(key) == 0 { // append-only: the whole row is all there is
		key = make([]int, len(tm.Columns))
		for i := range key {
			key[i] = i
		}
	}
	inKey := map[int]bool{}
	for _, k := range key {
		inKey[k] = true
	}
	var rest []int
	for i := range tm.Columns {
		if !inKey[i] {
			rest = append(rest, i)
		}
	}
	if width <= 0 || width > len(rest) {
		width = max(len(rest), 1)
	}
	groups := [][]int{}
	for len(rest) > width {
		groups = append(groups, rest[:width])
		rest = rest[width:]
	}
	groups = append(groups, rest)
	return &hasher{seed: maphash.MakeSeed(), buckets: buckets, key: key, groups: groups}
}

// sourceSums hashes every group of each whole row that scan gives.
func (h *hasher) sourceSums(ctx context.Context, tm *schema.TableMap, scan Scanner, rows *uint64) ([]bucket, error) {
	sums := make([]bucket, h.buckets)
	var buf []byte
	err := scan(ctx, tm, func(values []any) error {
		var b, n int
		buf, b = h.keyOf(buf[:0], values)
		n = len(buf)
		for g := range h.groups {
			buf = h.group(buf[:n], g, values)
			sums[b].sum += maphash.Bytes(h.seed, buf)
		}
		sums[b].rows++
		*rows++
		return nil
	})
	return sums, err
}

// destSums reads the destination one group of columns at a time.
func (h *hasher) destSums(ctx context.Context, tm *schema.TableMap, scan ColumnScanner, rows *uint64) ([]bucket, error) {
	sums := make([]bucket, h.buckets)
	var buf []byte
	for g := range h.groups {
		err := h.scanGroup(ctx, tm, scan, g, func(row []any) error {
			var b int
			buf, b = h.keyOf(buf[:0], row)
			buf = h.group(buf, g, row)
			sums[b].sum += maphash.Bytes(h.seed, buf)
			if g == 0 {
				sums[b].rows++
				*rows++
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return sums, nil
}

// scanGroup scans the key and group g's columns, and calls fn with a row
// as wide as the table that holds them in their places (the others nil).
func (h *hasher) scanGroup(ctx context.Context, tm *schema.TableMap, scan ColumnScanner, g int, fn func(row []any) error) error {
	cols := append(append([]int(nil), h.key...), h.groups[g]...)
	row := make([]any, len(tm.Columns))
	return scan(ctx, tm, cols, func(values []any) error {
		for i, c := range cols {
			row[c] = values[i]
		}
		return fn(row)
	})
}

// keyOf encodes the row's key canonically into buf and returns its bucket.
func (h *hasher) keyOf(buf []byte, row []any) ([]byte, int) {
	for _, i := range h.key {
		buf = schema.AppendEncoded(buf, row[i])
	}
	return buf, int(maphash.Bytes(h.seed, buf) % uint64(h.buckets))
}

// group appends group g's values of the row to buf, after the key.
func (h *hasher) group(buf []byte, g int, row []any) []byte {
	buf = strconv.AppendInt(append(buf, '|'), int64(g), 10)
	buf = append(buf, '|')
	for _, i := range h.groups[g] {
		buf = schema.AppendEncoded(buf, row[i])
	}
	return buf
}

// seen is a row of a differing bucket: its encoding and its description.
type seen struct{ enc, desc string }

// diff collects the rows of the differing buckets on both sides and names
// the keys whose rows differ.
func (h *hasher) diff(ctx context.Context, tm *schema.TableMap, source Scanner, dest ColumnScanner, buckets map[int]bool, max int) ([]Difference, error) {
	src := map[string]seen{}
	var buf []byte
	err := source(ctx, tm, func(values []any) error {
		var b int
		buf, b = h.keyOf(buf[:0], values)
		if buckets[b] {
			for g := range h.groups {
				buf = h.group(buf, g, values)
			}
			src[describeKey(tm, h.key, values)] = seen{string(buf), describeRow(tm, values)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	dst, err := h.destRows(ctx, tm, dest, buckets)
	if err != nil {
		return nil, err
	}
	var diffs []Difference
	for k, s := range src {
		if d, ok := dst[k]; !ok || d.enc != s.enc {
			diffs = append(diffs, Difference{Key: k, Source: s.desc, Dest: d.desc})
		}
	}
	for k, d := range dst {
		if _, ok := src[k]; !ok {
			diffs = append(diffs, Difference{Key: k, Dest: d.desc})
		}
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].Key < diffs[j].Key })
	if len(diffs) > max {
		diffs = diffs[:max]
	}
	return diffs, nil
}

// destRows assembles the destination's rows of the differing buckets from
// its groups of columns. A key that a group lacks (a row changed between
// the scans) encodes without that group, so it differs from the source.
func (h *hasher) destRows(ctx context.Context, tm *schema.TableMap, dest ColumnScanner, buckets map[int]bool) (map[string]seen, error) {
	type partial struct {
		enc  []byte
		next int // the group expected next
		row  []any
	}
	rows := map[string]*partial{}
	var buf []byte
	for g := range h.groups {
		err := h.scanGroup(ctx, tm, dest, g, func(row []any) error {
			var b int
			buf, b = h.keyOf(buf[:0], row)
			if !buckets[b] {
				return nil
			}
			k := describeKey(tm, h.key, row)
			p := rows[k]
			if p == nil {
				p = &partial{enc: append([]byte(nil), buf...), row: make([]any, len(row))}
				rows[k] = p
			}
			if p.next == g {
				p.enc = h.group(p.enc, g, row)
				p.next++
			}
			for _, c := range h.groups[g] {
				p.row[c] = row[c]
			}
			for _, c := range h.key {
				p.row[c] = row[c]
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make(map[string]seen, len(rows))
	for k, p := range rows {
		out[k] = seen{string(p.enc), describeRow(tm, p.row)}
	}
	return out, nil
}

func describeKey(tm *schema.TableMap, key []int, values []any) string {
	parts := make([]string, len(key))
	for i, k := range key {
		parts[i] = tm.Columns[k].Name + "=" + short(schema.Canonical(values[k]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func describeRow(tm *schema.TableMap, values []any) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = tm.Columns[i].Name + "=" + short(schema.Canonical(v))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func short(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + "…"
	}
	return strconv.Quote(s)
}
