package replicator

import (
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
)

// Observer is told what the replicator does, for metrics and status. Calls
// come from the replicator's goroutine and must return quickly. Table names
// are PostgreSQL's schema.table; ops are insert, update, delete, truncate.
type Observer interface {
	// Change counts one decoded change.
	Change(table, op string)
	// Flushed reports a flush that wrote rows in took.
	Flushed(rows int, took time.Duration)
	// Confirmed reports a new position confirmed to PostgreSQL, and the
	// commit time of the last transaction it covers (zero when the position
	// came from a keepalive).
	Confirmed(lsn pglogrepl.LSN, commitTime time.Time)
	// ServerWAL reports the server's WAL end as the stream last said it.
	ServerWAL(lsn pglogrepl.LSN)
	// Heartbeat reports a ferry.heartbeat message arriving in the stream,
	// with the time it was emitted.
	Heartbeat(emitted time.Time)
	// SnapshotProgress reports rows copied so far of a table; total is
	// PostgreSQL's estimate (0 when unknown); done is set once, at the end.
	SnapshotProgress(table string, rows, total uint64, done bool)
	// Retry reports a failed attempt that will be retried; kind is
	// "clickhouse" or "postgres".
	Retry(kind string, err error)
}

// ChangeCounter is an Observer that hands out, per table and op, a function
// that counts one change as Change does, without looking the two up at
// every change (a per-row cost the stream avoids where it can).
type ChangeCounter interface {
	Counter(table, op string) func()
}

// NopObserver ignores everything; it is the default Observer.
type NopObserver struct{}

func (NopObserver) Change(string, string)                         {}
func (NopObserver) Flushed(int, time.Duration)                    {}
func (NopObserver) Confirmed(pglogrepl.LSN, time.Time)            {}
func (NopObserver) ServerWAL(pglogrepl.LSN)                       {}
func (NopObserver) Heartbeat(time.Time)                           {}
func (NopObserver) SnapshotProgress(string, uint64, uint64, bool) {}
func (NopObserver) Retry(string, error)                           {}

// TableObserver may be implemented by an Observer to be told which tables
// are replicated, for a status page that lists a table before any of its
// rows moved.
type TableObserver interface {
	// Tables reports every table replicated now: once they are resolved at
	// each start (before the initial copy), and again after a table joins,
	// is renamed or is dropped. Called from the replicator's goroutine.
	Tables(tables []ReplicatedTable)
}

// ReplicatedTable is one table a TableObserver is told of.
type ReplicatedTable struct {
	// Table is PostgreSQL's schema.table, as the Observer's other calls
	// name it; Schema and Name are its parts.
	Table, Schema, Name string
	// Destination is the ClickHouse table's name (the Kafka sink names its
	// topic from Schema and Name instead).
	Destination string
	// AppendOnly is set for a table replicated insert-only.
	AppendOnly bool
}

// reportTables tells a TableObserver the tables of rels.
func (r *Replicator) reportTables(rels []*relation) {
	to, ok := r.cfg.Observer.(TableObserver)
	if !ok {
		return
	}
	tables := make([]ReplicatedTable, 0, len(rels))
	for _, rel := range rels {
		tables = append(tables, ReplicatedTable{Table: rel.ref.String(), Schema: rel.ref.Schema, Name: rel.ref.Name, Destination: rel.tm.Name, AppendOnly: rel.ref.AppendOnly})
	}
	slices.SortFunc(tables, func(a, b ReplicatedTable) int { return strings.Compare(a.Table, b.Table) })
	to.Tables(tables)
}

// reportTables tells a TableObserver the stream's tables.
func (s *stream) reportTables() {
	rels := make([]*relation, 0, len(s.byOID))
	for _, rel := range s.byOID {
		rels = append(rels, rel)
	}
	s.rep.reportTables(rels)
}
