// Package bench is `ferry bench`: the primary-key strategy write benchmark.
//
// For each strategy (bigserial, identity, uuidv4, uuidv7, uuidv7-mono,
// hash8, fillfactor70, snowflake, and uuidv7-native where the server has
// uuidv7()) it creates a table of the seeds' orders shape in the schema
// ferry_bench, seeds it, and runs each workload (insert, insert-batch,
// update-spread, update-hot) n times with pgx clients for a fixed
// duration. Each run measures throughput and latency, WAL bytes and
// full-page images per row, heap and PK-index size, avg_leaf_density, a
// wait-event histogram of its own backends (pg_stat_activity twice a
// second), the PK-index blocks its backends pin (pg_buffercache), and with
// Config.WithCDC the lag of an in-process ferry replicator reading the
// same WAL, measured from the outside through the slot's confirmed
// position.
//
// Lifecycle: Run drops and recreates ferry_bench, benchmarks one strategy
// at a time (create, seed, VACUUM, optionally a slot and a replicator,
// the runs, drop), and drops the schema at the end unless Config.Keep.
// Write renders results.json, report.md and SVG charts.
//
// Guarantees: client-side keys are generated from math/rand/v2 ChaCha8
// streams fixed by the recorded seed, so the key sequences (apart from
// their timestamps) repeat across invocations. Every run reads back the
// settings it depends on, checks the exact row count and the version and
// variant of every UUID key, and is left out of the medians, with its
// reason recorded, when a check fails. WAL and full-page-image counts are
// cluster-wide: other sessions writing at the same time inflate them, and
// the samples of other active sessions are recorded to show when that
// happened. Run refuses to start (ErrBusy) while another benchmark uses
// the server.
package bench
