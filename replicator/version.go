package replicator

import "fmt"

// Supported PostgreSQL versions. ferry publishes partitioned tables
// through their roots (publish_via_partition_root, PostgreSQL 13), and its
// DDL capture, heartbeats and streaming of large transactions travel as
// logical decoding messages and protocol 2, which pgoutput has only from
// PostgreSQL 14 on.
const (
	minPostgres        = 13
	minPostgresCapture = 14
)

// checkServerVersion decides whether ferry run can replicate from a server
// of this major version (0: unknown, let through), and returns a note for
// the log when something the user installed cannot work there: before 14
// ferry setup's triggers emit messages pgoutput never sends, so ferry
// follows schema changes from Relation messages alone.
func checkServerVersion(major int, ddlCapture bool) (note string, err error) {
	if major != 0 && major < minPostgres {
		return "", fmt.Errorf("PostgreSQL %d is not supported: ferry needs PostgreSQL %d or later (publish_via_partition_root)", major, minPostgres)
	}
	if ddlCapture && major != 0 && major < minPostgresCapture {
		return fmt.Sprintf("ferry setup's DDL capture is installed but inert on PostgreSQL %d: pgoutput sends logical decoding messages only from PostgreSQL %d on, "+
			"so ferry follows schema changes from Relation messages alone, as without ferry setup (a renamed column looks like a dropped one and an added one)",
			major, minPostgresCapture), nil
	}
	return "", nil
}

// checkSetupVersion refuses to install the DDL capture where its messages
// would never reach ferry.
func checkSetupVersion(major int) error {
	if major != 0 && major < minPostgres {
		return fmt.Errorf("PostgreSQL %d is not supported: ferry needs PostgreSQL %d or later", major, minPostgres)
	}
	if major != 0 && major < minPostgresCapture {
		return fmt.Errorf("ferry setup needs PostgreSQL %d or later: the server is %d, whose pgoutput sends no logical decoding messages, "+
			"so the captured DDL would never reach ferry; ferry run works without it (schema changes are followed from Relation messages)",
			minPostgresCapture, major)
	}
	return nil
}
