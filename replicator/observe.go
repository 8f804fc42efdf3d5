package replicator

import (
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

// NopObserver ignores everything; it is the default Observer.
type NopObserver struct{}

func (NopObserver) Change(string, string)                         {}
func (NopObserver) Flushed(int, time.Duration)                    {}
func (NopObserver) Confirmed(pglogrepl.LSN, time.Time)            {}
func (NopObserver) ServerWAL(pglogrepl.LSN)                       {}
func (NopObserver) Heartbeat(time.Time)                           {}
func (NopObserver) SnapshotProgress(string, uint64, uint64, bool) {}
func (NopObserver) Retry(string, error)                           {}
