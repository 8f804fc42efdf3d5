// Package clickhouse is ferry's ClickHouse sink: it implements loader.Sink
// and loader.SnapshotStore on top of clickhouse-go's native protocol, and
// gives `ferry verify` a way to read back what was replicated.
//
// Every replicated table is a ReplacingMergeTree keyed like its PostgreSQL
// source and versioned by _ferry_version (the WAL position of the change).
// A delete is stored as a row with _ferry_deleted = 1, so the live rows of a
// table are those of `SELECT ... FINAL WHERE _ferry_deleted = 0`.
//
// Guarantees:
//
//   - Write sends one batch as one INSERT: when it returns nil every row is
//     stored. When it returns an error, either nothing was sent (values are
//     checked and Unchanged ones resolved first) or the INSERT failed, which
//     ClickHouse makes atomic for a batch of up to max_insert_block_size
//     rows (about a million). Either way the caller may retry the same
//     batch: replayed rows carry the same key and version, and collapse.
//   - Unchanged (TOASTed) values are resolved before anything is sent, from
//     an earlier row of the same key in the batch or from the row stored in
//     ClickHouse, whichever is the key's latest version below the row's. A
//     value that cannot be found fails the batch; ferry never writes a
//     guessed value. A deleted row with Unchanged values, just before the
//     old key's delete of a key change, is the Kafka loader's carrier of
//     the old key's values to the new key: it is stored with them resolved.
//   - Every DateTime64(6) value arrives and is read back exact, past 2262
//     too, where clickhouse-go's nanoseconds since 1970 end: a batch that
//     holds such a value is one INSERT ... SELECT from an external table
//     of Int64 microseconds (rawtime.go), and reads convert on the server.
//   - IsRetryable tells a transient failure (connection lost, timeout, a
//     server that is overloaded) from a batch that ClickHouse rejected and
//     that will be rejected again.
//   - No error or log line carries the DSN's password.
//
// Prepare checks that an existing table has the columns and types the
// mapping expects and refuses to write into one that does not: ferry does
// not alter tables yet.
package clickhouse
