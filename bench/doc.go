// Package bench will hold ferry bench: the primary-key strategy write
// benchmark (bigserial, UUIDv4, UUIDv7, hash partitioning, fillfactor)
// that measures OLTP throughput, WAL volume and the decoding lag the
// replicator sees on the same WAL. It is its own issue; nothing is here yet.
package bench
