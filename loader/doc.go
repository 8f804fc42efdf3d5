// Package loader is the contract between the replication stream and the
// places its rows go.
//
// A Sink stores batches of Rows (one table each, in stream order) and says
// when they are durable: Write returns nil only once every row is stored.
// The Batcher groups rows per table and bounds how many are held in memory.
// Whoever reads the stream acknowledges a position upstream (a PostgreSQL
// LSN, a Kafka offset) only after a Flush that covered everything before it
// returned nil.
//
// Implementations live in sub-packages: loader/clickhouse writes
// ReplacingMergeTree tables.
package loader
