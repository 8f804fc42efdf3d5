// Package verify compares a table's live rows in PostgreSQL with what
// ClickHouse holds for it.
//
// Both sides are streamed once, in any order. Rows are spread over buckets
// by a hash of their key; each bucket keeps a row count and an
// order-independent checksum (a sum of row hashes). Memory therefore does
// not grow with the table. Only when buckets differ is a second pass made,
// over those buckets alone, to name the differing keys.
//
// The destination may be read in groups of columns (Config.DestColumns),
// one scan per group with the key: a row's hash is a sum of one hash per
// group, so both sides sum alike however the destination was read.
//
// PostgreSQL values go through the same conversion replication uses, and
// both sides are compared through schema.Canonical, so a value that
// replication changed on the way shows up as a difference. Run it while
// the source is quiet (for example after ferry run --catch-up): rows in
// flight differ by nature.
package verify
