package clickhouse

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// StateReplicaPath is the ZooKeeper path of ferry's state tables on a
// cluster. It has no {shard}: every server of the cluster is a replica of
// the one table, so ferry started on any of them finds its state. The
// replica name is '{shard}-{replica}', unique across the cluster even where
// replica macros repeat from shard to shard.
const StateReplicaPath = "/clickhouse/tables/ferry_state/{database}/{table}"

// stateTableDDL creates one of ferry's state tables (columns holds an
// "updated UInt64" version column): on a single server a
// ReplacingMergeTree, on a cluster ON CLUSTER a ReplicatedReplacingMergeTree
// with a replica on every server, so that it outlives the server the DSN
// names.
func (s *Sink) stateTableDDL(name, columns, orderBy string) string {
	engine := "ReplacingMergeTree(updated)"
	if s.cluster != "" {
		engine = "ReplicatedReplacingMergeTree(" + schema.QuoteCHString(StateReplicaPath) + ", '{shard}-{replica}', updated)"
	}
	return "CREATE TABLE IF NOT EXISTS " + s.table(name) + schema.OnCluster(s.cluster) +
		" (" + columns + ") ENGINE = " + engine + " ORDER BY " + orderBy
}

// ensureStateTable creates a state table once per Sink. On a cluster the
// statements go ON CLUSTER only when the database or table is missing on
// this server: distributed DDL waits for every server of the cluster, so
// running it at every start would keep ferry from starting (for
// distributed_ddl_task_timeout, 180 s by default, and then with an error)
// whenever one server is down, and the point of replicating the state is
// that ferry can start while one is.
func (s *Sink) ensureStateTable(ctx context.Context, name, columns, orderBy string) error {
	if s.ready[name] {
		return nil
	}
	if err := s.ensureDatabase(ctx); err != nil {
		return err
	}
	engine, err := s.tableEngine(ctx, name)
	if err != nil {
		return err
	}
	switch {
	case engine == "":
		if err := s.createOnCluster(ctx, s.stateTableDDL(name, columns, orderBy), name); err != nil {
			return err
		}
	case s.cluster != "" && !strings.HasPrefix(engine, "Replicated"):
		s.log.Warn("ferry's state table is not replicated (an earlier ferry made it): "+
			"it is lost with this server; to replicate it, stop ferry, copy it into a ReplicatedReplacingMergeTree "+
			"created ON CLUSTER as ferry does, and rename that over it",
			zap.String("table", s.db+"."+name), zap.String("engine", engine))
	}
	if err := s.makeDurable(ctx, name); err != nil {
		return err
	}
	if s.ready == nil {
		s.ready = map[string]bool{}
	}
	s.ready[name] = true
	return nil
}

// createOnCluster runs a CREATE TABLE; on a cluster, an error that another
// server reports (distributed DDL runs the statement on every server and
// fails when one of them does, e.g. one whose ZooKeeper session expired
// midway and that then finds its own replica half made) does not stop
// ferry when this server has the table: ferry reads and writes it here,
// and a replica missing elsewhere is logged for the operator to add.
func (s *Sink) createOnCluster(ctx context.Context, ddl, name string) error {
	err := s.conn.Exec(ctx, ddl)
	if err == nil {
		return nil
	}
	if s.cluster != "" {
		if engine, lerr := s.tableEngine(ctx, name); lerr == nil && engine != "" {
			s.log.Warn("CREATE TABLE ON CLUSTER failed on some server, but this server has the table: going on; "+
				"check that every server of the cluster has it",
				zap.String("table", s.db+"."+name), zap.String("cluster", s.cluster), zap.Error(s.red.wrap(err, "clickhouse")))
			return nil
		}
	}
	return s.red.wrap(classify(err), "clickhouse: create table %s", s.table(name))
}

// ensureDatabase creates the sink's database, on a cluster ON CLUSTER and
// only when this server lacks it (see ensureStateTable).
func (s *Sink) ensureDatabase(ctx context.Context) error {
	if s.cluster != "" {
		var n uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = "+
			schema.QuoteCHString(s.db)).Scan(&n); err != nil {
			return s.red.wrap(err, "clickhouse: look up database %s", s.db)
		}
		if n > 0 {
			return nil
		}
	}
	return s.exec(ctx, schema.CreateDatabaseSQL(s.db, s.cluster), fmt.Sprintf("create database %s", s.db))
}

// tableEngine is the engine of a table of the sink's database on this
// server, "" when there is no such table.
func (s *Sink) tableEngine(ctx context.Context, name string) (string, error) {
	rows, err := s.conn.Query(ctx, "SELECT engine FROM system.tables WHERE database = "+
		schema.QuoteCHString(s.db)+" AND name = "+schema.QuoteCHString(name))
	if err != nil {
		return "", s.red.wrap(err, "clickhouse: look up %s", s.table(name))
	}
	defer rows.Close()
	var engine string
	for rows.Next() {
		if err := rows.Scan(&engine); err != nil {
			return "", s.red.wrap(err, "clickhouse: look up %s", s.table(name))
		}
	}
	if err := rows.Err(); err != nil {
		return "", s.red.wrap(err, "clickhouse: look up %s", s.table(name))
	}
	return engine, nil
}
