// Package replicator reads one PostgreSQL database through logical
// replication and hands its changes, in commit order, to a loader.Sink.
//
// Lifecycle of Run:
//
//  1. Preflight: wal_level, the role's REPLICATION and SELECT privileges, the
//     tables to replicate (a table without a replica identity is left out,
//     with a warning that names the fixes, unless it was named append-only).
//  2. Publication: created when missing; on a first start its table list is
//     set to the tables ferry replicates.
//  3. First start: the slot (pgoutput) is created with an exported snapshot
//     and every table is copied under that snapshot before anything is
//     streamed. The destination remembers whether the copy finished
//     (loader.SnapshotStore); an interrupted copy is redone from a new slot.
//  4. Streaming: pgoutput changes become loader.Rows whose Version is the
//     change's WAL position, so a replay writes the same versions again and
//     ReplacingMergeTree collapses them. With Config.Streaming, PostgreSQL
//     14+ sends a transaction that outgrows logical_decoding_work_mem while
//     it runs; ferry keeps its changes in a spill file and hands them on only
//     at its commit (see streaming.go).
//
// Guarantees: the LSN confirmed to PostgreSQL is always the end of a
// transaction all of whose rows, and all earlier ones, the sink has stored.
// A crash at any point therefore replays from the last confirmed
// transaction and loses nothing. Standby status updates are sent well
// within wal_sender_timeout, also while the sink is retrying. Memory is
// bounded by the batch limits and the largest single row, however large a
// transaction is: rows are written in batches in the middle of a
// transaction (they are versioned, so a replay after a crash rewrites the
// same rows), and a streamed transaction waits on disk, not in memory.
package replicator
