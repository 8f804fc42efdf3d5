package schema

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Shape is what a user chose of a ClickHouse table's layout, beyond its
// columns (the config file's table-shapes key); the zero value is ferry's own.
// It applies where ferry makes the table: at the first copy, at a rebuild
// and at a resync.
type Shape struct {
	// OrderBy is the key's columns in the order wanted (ReplacingMergeTree
	// keeps one row per ORDER BY value, so no other column may be in it).
	OrderBy []string
	// PartitionBy is a ClickHouse expression over key columns only (rows
	// are replaced within a partition only; the sink checks the table it
	// made).
	PartitionBy string
	// TTL is the table's TTL clause, as ClickHouse takes it.
	TTL string
	// Settings are the table's engine settings, name → value as SQL.
	Settings map[string]string
	// Codecs are column name → the codec's arguments, as in CODEC(...).
	Codecs map[string]string
}

// IsZero reports whether the shape is ferry's own.
func (s Shape) IsZero() bool {
	return len(s.OrderBy) == 0 && s.PartitionBy == "" && s.TTL == "" && len(s.Settings) == 0 && len(s.Codecs) == 0
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// SetShape gives the table a shape, after checking it against the table;
// where says where the shape came from, for the errors (a config file's
// key, say).
func (m *TableMap) SetShape(s Shape, where string) error {
	table := m.Source.Schema + "." + m.Source.Name
	if len(s.OrderBy) > 0 {
		if m.Source.AppendOnly || m.Source.FullRow {
			return fmt.Errorf("%s.order_by: table %s has no key: an append-only or REPLICA IDENTITY FULL table is ordered by ferry's own columns (%s); remove order_by",
				where, table, strings.Join(m.keyOrder(), ", "))
		}
		key := m.keyOrder()
		sorted, want := slices.Clone(s.OrderBy), slices.Clone(key)
		sort.Strings(sorted)
		sort.Strings(want)
		if !slices.Equal(sorted, want) {
			return fmt.Errorf("%s.order_by: [%s] is not the key of %s in some order (its key is %s): ReplacingMergeTree keeps one row per ORDER BY value, "+
				"so a column beyond the key would leave a row's old version live beside the new one when an update changes it, and a key column left out would merge rows of different keys",
				where, strings.Join(s.OrderBy, ", "), table, strings.Join(key, ", "))
		}
	}
	for name := range s.Settings {
		if !settingName.MatchString(name) {
			return fmt.Errorf("%s.settings: %q is not a setting's name", where, name)
		}
	}
	for name := range s.Codecs {
		if !slices.ContainsFunc(m.Columns, func(c ColumnMap) bool { return c.Name == name }) {
			return fmt.Errorf("%s.codecs: table %s has no column %q", where, table, name)
		}
	}
	m.Shape = s
	return nil
}

// keyOrder is the key's columns in attnum order (or ferry's own columns
// for tables without a key), whatever the shape says.
func (m *TableMap) keyOrder() []string {
	switch {
	case m.Source.AppendOnly:
		return []string{VersionColumn, SeqColumn}
	case m.Source.FullRow:
		return []string{RowKeyColumn}
	}
	cols := make([]string, 0, len(m.Key))
	for _, i := range m.Key {
		cols = append(cols, m.Columns[i].Name)
	}
	return cols
}

// shapeClauses are the clauses after ORDER BY: TTL and SETTINGS.
func (m *TableMap) shapeClauses() string {
	var b strings.Builder
	if m.Shape.TTL != "" {
		b.WriteString("\nTTL " + m.Shape.TTL)
	}
	if len(m.Shape.Settings) > 0 {
		names := make([]string, 0, len(m.Shape.Settings))
		for n := range m.Shape.Settings {
			names = append(names, n)
		}
		sort.Strings(names)
		for i, n := range names {
			if i == 0 {
				b.WriteString("\nSETTINGS ")
			} else {
				b.WriteString(", ")
			}
			b.WriteString(n + " = " + m.Shape.Settings[n])
		}
	}
	return b.String()
}

// SettingValue is a setting's value as SQL: a number or a boolean as it
// is, anything else as a string literal.
func SettingValue(v any) string {
	switch v := v.(type) {
	case bool:
		if v {
			return "1"
		}
		return "0"
	case int, int64, uint64, float64:
		return fmt.Sprint(v)
	case string:
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			return v
		}
		return QuoteCHString(v)
	}
	return QuoteCHString(fmt.Sprint(v))
}
