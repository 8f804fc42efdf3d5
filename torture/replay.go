package torture

import (
	"context"
	"fmt"
	"strings"
)

// replayCheck reads a table's stored rows without FINAL, grouped by its
// sorting key and _ferry_version. A batch written again after a fault (a
// ClickHouse restart while its INSERT was in flight, a ferry killed before
// it confirmed) stores its rows a second time under the same key and
// version, which FINAL collapses: that is counted, as evidence that
// replays happened. Two stored rows of one key and version that differ in
// any value are a disagreement: FINAL would then show whichever the merge
// kept, so a replay was not the same write. The check is independent of
// the fingerprint, which reads through FINAL.
func (e *env) replayCheck(ctx context.Context, t string, strict bool, res *Result) error {
	rows, err := e.ch.Query(ctx, "SELECT name, is_in_sorting_key FROM system.columns WHERE database = ? AND table = ?", e.name, t)
	if err != nil {
		return err
	}
	var key, vals []string
	version := false
	for rows.Next() {
		var n string
		var inKey uint8
		if err := rows.Scan(&n, &inKey); err != nil {
			rows.Close()
			return err
		}
		q := "`" + strings.ReplaceAll(strings.ReplaceAll(n, `\`, `\\`), "`", "\\`") + "`"
		switch {
		case inKey == 1:
			key = append(key, q)
			version = version || n == "_ferry_version"
		case n == "_ferry_synced_at": // when ferry wrote the row: a replay's differs
		default:
			vals = append(vals, q)
			version = version || n == "_ferry_version"
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(key) == 0 || !version || len(vals) == 0 {
		return nil // not a table of ferry's shape (or no table): the other checks say so
	}
	group := append(append([]string(nil), key...), "`_ferry_version`")
	from := "`" + e.name + "`.`" + strings.ReplaceAll(strings.ReplaceAll(t, `\`, `\\`), "`", "\\`") + "`"
	// A conflict at the key's latest version is a finding; one at an
	// older version is by design: a replayed row that a later stored
	// version supersedes takes that row's values for its unchanged
	// (TOASTed) columns (loader/clickhouse's resolveUnchanged), and the
	// later version is what FINAL and every merge keep.
	q := fmt.Sprintf("SELECT toUInt64(sum(c - 1)), toUInt64(countIf(u > 1)), toUInt64(countIf(u > 1 AND `_ferry_version` = mv)) "+
		"FROM (SELECT %s, count() AS c, uniqExact(tuple(%s)) AS u FROM %s GROUP BY %s) AS versions "+
		"ANY LEFT JOIN (SELECT %s, max(`_ferry_version`) AS mv FROM %s GROUP BY %s) AS latest USING (%s)",
		strings.Join(group, ", "), strings.Join(vals, ", "), from, strings.Join(group, ", "),
		strings.Join(key, ", "), from, strings.Join(key, ", "), strings.Join(key, ", "))
	var replayed, conflicting, latest uint64
	if err := e.ch.QueryRow(ctx, q).Scan(&replayed, &conflicting, &latest); err != nil {
		return fmt.Errorf("replay check: %w", err)
	}
	res.Replayed += replayed
	if older := conflicting - latest; older > 0 {
		res.Events = append(res.Events, fmt.Sprintf("table %s: %d keys have two stored rows of an older version that differ "+
			"(a replay superseded by a later version, which took that version's unchanged values)", t, older))
	}
	if latest > 0 {
		msg := fmt.Sprintf("table %s: %d keys have two stored rows of their latest version that differ (a replayed write was not the same write)%s",
			t, latest, e.replayDiffers(ctx, from, group, vals))
		if strict {
			res.Disagreements = append(res.Disagreements, msg)
		} else {
			res.Events = append(res.Events, msg)
		}
	}
	return nil
}

// replayDiffers names the columns in which stored rows of one key and
// version differ, with an example, for the finding.
func (e *env) replayDiffers(ctx context.Context, from string, group, vals []string) string {
	var us, counts []string
	for i, v := range vals {
		us = append(us, fmt.Sprintf("uniqExact(%s) AS u%d", v, i))
		counts = append(counts, fmt.Sprintf("toUInt64(countIf(u%d > 1))", i))
	}
	q := fmt.Sprintf("SELECT %s FROM (SELECT %s FROM %s GROUP BY %s)", strings.Join(counts, ", "), strings.Join(us, ", "), from, strings.Join(group, ", "))
	n := make([]uint64, len(vals))
	dest := make([]any, len(vals))
	for i := range n {
		dest[i] = &n[i]
	}
	if err := e.ch.QueryRow(ctx, q).Scan(dest...); err != nil {
		return " (columns not read: " + err.Error() + ")"
	}
	var cols []string
	for i, c := range n {
		if c > 0 {
			cols = append(cols, fmt.Sprintf("%s (%d keys)", vals[i], c))
		}
	}
	var example string
	q = fmt.Sprintf("SELECT toString(tuple(%s)) FROM %s WHERE (%s) IN (SELECT %s FROM %s GROUP BY %s HAVING uniqExact(tuple(%s)) > 1 LIMIT 1) LIMIT 4",
		strings.Join(append(append([]string(nil), group...), vals...), ", "), from, strings.Join(group, ", "),
		strings.Join(group, ", "), from, strings.Join(group, ", "), strings.Join(vals, ", "))
	if rows, err := e.ch.Query(ctx, q); err == nil {
		for rows.Next() {
			var r string
			if rows.Scan(&r) == nil {
				if len(r) > 600 {
					r = r[:600] + "..."
				}
				example += "\n      " + r
			}
		}
		rows.Close()
	}
	return "; differing: " + strings.Join(cols, ", ") + "; rows of the first such key:" + example
}
