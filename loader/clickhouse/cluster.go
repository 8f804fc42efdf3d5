package clickhouse

import (
	"context"
	"fmt"

	"github.com/ferry-cdc/ferry/schema"
)

// clusterSettings are the settings of ferry's session that decide whether
// an INSERT into a Distributed table is stored when it returns.
var clusterSettings = []string{"insert_distributed_sync", "distributed_foreground_insert", "insert_quorum", "insert_quorum_parallel"}

// checkClusterSettings reads, on a cluster, the settings ferry's inserts
// run with (the DSN's, the user's profile's, and ferry's own
// insert_distributed_sync=1) and refuses those under which an INSERT into
// a Distributed table may return without its rows stored.
func (s *Sink) checkClusterSettings(ctx context.Context) error {
	q := "SELECT name, value FROM system.settings WHERE name IN ("
	for i, n := range clusterSettings {
		if i > 0 {
			q += ", "
		}
		q += schema.QuoteCHString(n)
	}
	rows, err := s.conn.Query(ctx, q+")")
	if err != nil {
		return s.red.wrap(err, "clickhouse: read the insert settings of %s", s.host)
	}
	defer rows.Close()
	set := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return s.red.wrap(err, "clickhouse: read the insert settings of %s", s.host)
		}
		set[name] = value
	}
	if err := rows.Err(); err != nil {
		return s.red.wrap(err, "clickhouse: read the insert settings of %s", s.host)
	}
	return clusterSettingsProblem(s.cluster, set)
}

// clusterSettingsProblem is the refusal of checkClusterSettings, nil when
// the settings are safe. A setting the server does not have is absent.
func clusterSettingsProblem(cluster string, set map[string]string) error {
	for _, n := range clusterSettings[:2] {
		if v, ok := set[n]; ok && v != "1" {
			return fmt.Errorf("clickhouse: --ch-cluster %s: %s is %s in ferry's session, though ferry asks for 1 "+
				"(a settings constraint or a readonly profile of the user?): without it an INSERT into a Distributed table "+
				"returns once its rows are queued on this server's disk, and rows lost with this server would be lost for good "+
				"after ferry confirmed their WAL; let the user set %s = 1", cluster, n, v, n)
		}
	}
	quorum, parallel := set["insert_quorum"], set["insert_quorum_parallel"]
	if quorum != "" && quorum != "0" && parallel == "0" {
		return fmt.Errorf("clickhouse: --ch-cluster %s: insert_quorum = %s with insert_quorum_parallel = 0: an INSERT into "+
			"a Distributed table then can report success and store nothing (ClickHouse issue #97557; PeerDB lost rows so); "+
			"set insert_quorum_parallel = 1 or insert_quorum = 0 (in the DSN or the user's profile)", cluster, quorum)
	}
	return nil
}
