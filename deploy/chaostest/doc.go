// Package chaostest is ferry's fault-injection suite: it runs the ferry
// binary as a subprocess against a PostgreSQL cluster and a ClickHouse
// server of its own, reached through TCP proxies it controls, while a
// mixed writer changes the source, and injects faults: SIGKILL of ferry,
// ClickHouse killed for a while, PostgreSQL restarted (fast and immediate),
// connections cut, stalled or slowed, SIGTERM in the middle of an insert,
// and a batch ClickHouse rejects.
// After each scenario ferry catches up and `ferry verify` must pass, and the
// suite counts the rows lost and doubled, which must be zero.
//
// The package holds only tests. `go test ./deploy/chaostest` runs the short
// mode (a few kills, an 8 s outage, a small writer); CHAOS=full (make chaos)
// runs the long one. CHAOS_REPORT=file writes the scenarios' results as a
// markdown table; CHAOS_LOG=1 prints ferry's output of every scenario, not
// only of the failed ones. The tests skip when not run as root (PostgreSQL runs as
// the postgres user) or when initdb or clickhouse-server is missing.
package chaostest
