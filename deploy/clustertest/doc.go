// Package clustertest runs ferry with --ch-cluster against a live
// ClickHouse cluster of its own: a ZooKeeper and four clickhouse-server
// (18.16) processes on loopback ports, two shards of two replicas each,
// with the shared PostgreSQL of the local stack (FERRY_PG_URL) as the
// source. It kills replicas and the server ferry talks to while a writer
// runs, and checks that the Distributed table reads as PostgreSQL does
// and that every replica holds its shard's rows.
//
// The package holds only tests. They skip, saying why, when
// clickhouse-server, java or Debian's zookeeper package is missing
// (CLUSTER=1 deploy/stack.sh up installs it), and on the modern leg of
// `make test`: the servers are the test's own 18.16, so one leg is enough.
// CLUSTER_LOG=1 prints ferry's output even when the test passes.
package clustertest
