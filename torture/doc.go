// Package torture is ferry's randomized, seeded, differential test of the
// whole pipeline (issue 15). A round is generated from (seed, round) alone
// (NewPlan): a random schema of tables with a spread of mapped types and
// their edge values, a preload that the initial copy reads, a concurrent
// workload of several sessions (transactions with savepoints and
// rollbacks, COPY, INSERT ... SELECT, key changes, delete and re-insert,
// updates that leave TOASTed values unchanged, TRUNCATE, transactions
// that stream, DDL), and a schedule of faults on the ferry subprocess
// (kill -9, SIGTERM, cut and stalled connections through
// internal/testkit's proxy), and in some rounds server restarts
// (restart.go): PostgreSQL stopped fast or crash-like and ClickHouse
// stopped or killed, at an offset or at the start of an initial copy or
// a rebuild, on a PostgreSQL and a ClickHouse of torture's own (Private),
// never the shared stack's. Some rounds go through Kafka (kafka.go): ferry
// run --sink kafka into an in-process broker and ferry load --from-kafka
// into ClickHouse, both under the faults. Run executes it in a private PostgreSQL
// database, role and slot and a private ClickHouse database, catches up
// with ferry run --catch-up, and compares every published table with a
// fingerprint computed in SQL on each side, independent of ferry verify,
// plus a per-key check and a check that rows stored twice under one key
// and version (replayed writes) are the same row, and runs ferry verify
// too: a disagreement between
// any two of them is a finding. Shrink cuts a failing plan down to fewer
// operations; Save writes it as a SQL script with its fault schedule.
//
// The package is a library so that the test that drives it (go test
// ./torture, with -torture.* flags; make torture) stays thin, and so that a
// later ferry subcommand could reuse it.
package torture
