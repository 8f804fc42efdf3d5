package schema

import "strings"

// LocalSuffix names a table's shard-local part on a ClickHouse cluster:
// orders is the Distributed table, orders_local the replicated one it
// spreads rows over.
const LocalSuffix = "_local"

// ReplicaPath is the ZooKeeper (or ClickHouse Keeper) path of a cluster
// table's replicas, in ClickHouse's usual macros: {shard} and {replica} come
// from each server's <macros>, {database} and {table} are expanded by the
// server when the table is created.
const ReplicaPath = "/clickhouse/tables/{shard}/{database}/{table}"

// LocalName is the name of a cluster table's shard-local part.
func LocalName(name string) string { return name + LocalSuffix }

// OnCluster is the ON CLUSTER clause, or "" when cluster is empty.
func OnCluster(cluster string) string {
	if cluster == "" {
		return ""
	}
	return " ON CLUSTER " + QuoteCH(cluster)
}

// ClusterDDL is what CreateTableDDL is on a ClickHouse cluster: two
// statements, to run in order. The first creates <table>_local on every
// server of the cluster as a ReplicatedReplacingMergeTree with the same
// columns, version, deleted flag and ORDER BY as the single-server table;
// the second creates, under the table's own name, a Distributed table over
// the local ones that shards rows by cityHash64 of the ORDER BY columns.
// Every version of a row then lands on the same shard, so that
// ReplacingMergeTree (and FINAL, which ClickHouse applies per shard)
// collapses them; inserts and queries go to the Distributed table.
func (m *TableMap) ClusterDDL(database, cluster string) []string {
	local := *m
	local.Name = LocalName(m.Name)
	ddl := local.CreateTableDDL(database)
	// The head ends at the first " (\n" (quoted names hold no raw newline);
	// the engine is the last ENGINE clause.
	head, body, _ := strings.Cut(ddl, " (\n")
	head += OnCluster(cluster)
	if i := strings.LastIndex(body, "ENGINE = "+m.engine()); i >= 0 {
		body = body[:i] + "ENGINE = " + m.replicatedEngine() + body[i+len("ENGINE = "+m.engine()):]
	}
	dist := "CREATE TABLE IF NOT EXISTS " + m.qualified(database, m.Name) + OnCluster(cluster) +
		" AS " + m.qualified(database, local.Name) + "\n" +
		"ENGINE = Distributed(" + strings.Join([]string{
		QuoteCHString(cluster), QuoteCHString(database), QuoteCHString(local.Name), m.ShardingKey(),
	}, ", ") + ")"
	return []string{head + " (\n" + body, dist}
}

// ShardingKey is the Distributed table's sharding expression: a hash of
// the columns that identify a row (the key, or ferry's version and seq for
// append-only tables, or the row key for FullRow ones).
func (m *TableMap) ShardingKey() string {
	key := m.keyOrder()
	for i, c := range key {
		key[i] = QuoteCH(c)
	}
	return "cityHash64(" + strings.Join(key, ", ") + ")"
}

// replicatedEngine is engine() replicated across the shard's servers.
func (m *TableMap) replicatedEngine() string {
	args := []string{QuoteCHString(ReplicaPath), QuoteCHString("{replica}"), QuoteCH(VersionColumn)}
	if m.Caps.IsDeleted {
		args = append(args, QuoteCH(DeletedColumn))
	}
	return "ReplicatedReplacingMergeTree(" + strings.Join(args, ", ") + ")"
}

func (m *TableMap) qualified(database, table string) string {
	return QuoteCH(database) + "." + QuoteCH(table)
}

// ClusterAlterSQL is AlterSQL on a cluster: the change goes ON CLUSTER to
// the local tables first, where the data is, then to the Distributed
// table, whose columns must follow.
func (m *TableMap) ClusterAlterSQL(database, cluster string, c ColumnChange) []string {
	local := *m
	local.Name = LocalName(m.Name)
	out := make([]string, 0, 2)
	for _, t := range []*TableMap{&local, m} {
		q := t.AlterSQL(database, c)
		if q == "" {
			return nil
		}
		prefix := "ALTER TABLE " + t.qualified(database, t.Name)
		out = append(out, prefix+OnCluster(cluster)+strings.TrimPrefix(q, prefix))
	}
	return out
}

// TruncateSQL empties a replicated table: on a cluster its local tables ON
// CLUSTER (a Distributed table holds no rows of its own).
func (m *TableMap) TruncateSQL(database, cluster string) string {
	name := m.Name
	if cluster != "" {
		name = LocalName(name)
	}
	return "TRUNCATE TABLE IF EXISTS " + m.qualified(database, name) + OnCluster(cluster)
}

// DropTableSQL drops a table, on a cluster ON CLUSTER.
func DropTableSQL(database, table, cluster string) string {
	return "DROP TABLE IF EXISTS " + QuoteCH(database) + "." + QuoteCH(table) + OnCluster(cluster)
}

// CreateDatabaseSQL creates a database, on a cluster ON CLUSTER.
func CreateDatabaseSQL(database, cluster string) string {
	return "CREATE DATABASE IF NOT EXISTS " + QuoteCH(database) + OnCluster(cluster)
}
