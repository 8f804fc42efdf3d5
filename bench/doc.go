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
// Lifecycle: Run drops and recreates ferry_bench and benchmarks one
// strategy at a time. Every run gets a table of its own: create, seed,
// autovacuum off, VACUUM (ANALYZE), optionally a slot and a replicator,
// CHECKPOINT, then the window: a temporary physical slot, the insert
// position, the load, the run's own checks (row count, UUID bits), the
// insert position again. pg_waldump reads the window's WAL; the
// post-run CHECKPOINT, page counts and sizes come after it. The schema is
// dropped at the end unless Config.Keep. Write renders results.json,
// report.md and SVG charts.
//
// Guarantees: client-side keys come from math/rand/v2 ChaCha8 streams
// fixed by the recorded seed, and every run of an entry uses the same
// streams; time-ordered keys take their milliseconds from a synthetic
// clock (1 ms per Config.KeysPerMillisecond keys of the run), so each
// client writes the same key sequence in every run and invocation (how
// the clients interleave is up to the scheduler). WAL bytes, records and
// full-page images are counted from the window's own WAL by pg_waldump
// when the benchmark runs on the server's host; otherwise from
// pg_stat_wal, marked approximate. The window's WAL is cluster-wide: the
// records of other databases are counted, and a run with more than 1% of
// them, a checkpoint or an autovacuum in its window is discarded with the
// reason (Config.KeepDisturbed keeps it, marked). A run whose check fails
// is left out of the medians, with its reason recorded. Run refuses to
// start (ErrBusy) while another benchmark uses the database.
package bench
