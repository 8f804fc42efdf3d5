package clickhouse

import (
	"context"
	"fmt"
	"strings"
)

// fsyncSettings are the MergeTree settings behind Config.Fsync.
var fsyncSettings = []string{"fsync_after_insert", "fsync_part_directory"}

// checkFsync refuses Config.Fsync on a server without the settings, before
// anything is written.
func (s *Sink) checkFsync(ctx context.Context) error {
	if s.cluster != "" {
		return fmt.Errorf("clickhouse: --ch-fsync with --ch-cluster is not supported yet: " +
			"on a cluster, make inserts wait for a second replica instead (the insert_quorum setting in the --ch URL, e.g. ?insert_quorum=2)")
	}
	q := "SELECT count() FROM system.merge_tree_settings WHERE name IN ('" + strings.Join(fsyncSettings, "', '") + "')"
	var n uint64
	if err := s.conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return s.red.wrap(err, "clickhouse: look up the MergeTree settings %s", strings.Join(fsyncSettings, ", "))
	}
	if int(n) != len(fsyncSettings) {
		return fmt.Errorf("clickhouse: --ch-fsync needs the MergeTree settings %s, which ClickHouse %s at %s does not have: "+
			"upgrade ClickHouse (they exist in 21.x and later) or run without --ch-fsync",
			strings.Join(fsyncSettings, " and "), s.version, s.host)
	}
	return nil
}

// makeDurable sets the fsync settings on one of the sink's tables, new or
// existing, when Config.Fsync asks for them.
func (s *Sink) makeDurable(ctx context.Context, table string) error {
	if !s.fsync {
		return nil
	}
	set := make([]string, len(fsyncSettings))
	for i, name := range fsyncSettings {
		set[i] = name + " = 1"
	}
	return s.exec(ctx, "ALTER TABLE "+s.table(table)+" MODIFY SETTING "+strings.Join(set, ", "),
		"set "+strings.Join(fsyncSettings, ", ")+" on "+s.table(table))
}
