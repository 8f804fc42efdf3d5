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

// Config bounds the work. The zero value means the defaults.
type Config struct {
	// Buckets is how many key-hash buckets the checksums use. Default 4096.
	Buckets int
	// MaxDiffs is how many differing keys a Result names. Default 10.
	MaxDiffs int
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
func Table(ctx context.Context, tm *schema.TableMap, source, dest Scanner, cfg Config) (Result, error) {
	if cfg.Buckets <= 0 {
		cfg.Buckets = 4096
	}
	if cfg.MaxDiffs <= 0 {
		cfg.MaxDiffs = 10
	}
	res := Result{Table: tm.Source.Schema + "." + tm.Source.Name}
	h := newHasher(tm, cfg.Buckets)
	src, err := h.sums(ctx, tm, source, &res.SourceRows)
	if err != nil {
		return res, fmt.Errorf("verify %s in PostgreSQL: %w", res.Table, err)
	}
	dst, err := h.sums(ctx, tm, dest, &res.DestRows)
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

// hasher turns rows into bucket numbers and row hashes.
type hasher struct {
	seed    maphash.Seed
	buckets int
	key     []int
}

func newHasher(tm *schema.TableMap, buckets int) *hasher {
	key := tm.Key
	if len(key) == 0 { // append-only: the whole row is all there is
		key = make([]int, len(tm.Columns))
		for i := range key {
			key[i] = i
		}
	}
	return &hasher{seed: maphash.MakeSeed(), buckets: buckets, key: key}
}

func (h *hasher) sums(ctx context.Context, tm *schema.TableMap, scan Scanner, rows *uint64) ([]bucket, error) {
	sums := make([]bucket, h.buckets)
	var buf []byte
	err := scan(ctx, tm, func(values []any) error {
		var b int
		buf, b = h.row(buf[:0], values)
		sums[b].rows++
		sums[b].sum += maphash.Bytes(h.seed, buf)
		*rows++
		return nil
	})
	return sums, err
}

// row encodes the row canonically into buf and returns its bucket.
func (h *hasher) row(buf []byte, values []any) ([]byte, int) {
	for _, i := range h.key {
		buf = schema.AppendEncoded(buf, values[i])
	}
	b := int(maphash.Bytes(h.seed, buf) % uint64(h.buckets))
	buf = append(buf, '|')
	for _, v := range values {
		buf = schema.AppendEncoded(buf, v)
	}
	return buf, b
}

// diff collects the rows of the differing buckets on both sides and names
// the keys whose rows differ.
func (h *hasher) diff(ctx context.Context, tm *schema.TableMap, source, dest Scanner, buckets map[int]bool, max int) ([]Difference, error) {
	type seen struct{ enc, desc string }
	collect := func(scan Scanner) (map[string]seen, error) {
		rows := map[string]seen{}
		var buf []byte
		err := scan(ctx, tm, func(values []any) error {
			var b int
			buf, b = h.row(buf[:0], values)
			if buckets[b] {
				rows[describeKey(tm, h.key, values)] = seen{string(buf), describeRow(tm, values)}
			}
			return nil
		})
		return rows, err
	}
	src, err := collect(source)
	if err != nil {
		return nil, err
	}
	dst, err := collect(dest)
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
