package loader

import (
	"context"
	"errors"

	"github.com/ferry-cdc/ferry/schema"
)

// unchanged is the type of Unchanged.
type unchanged struct{}

// Unchanged stands for a TOASTed column that pgoutput did not send because
// the update left it as it was. A sink must replace it with the column's
// current value (from an earlier row of the same key, or from the
// destination) before it writes the row, and must fail rather than guess
// when it cannot find one.
var Unchanged any = unchanged{}

// ErrNoUnchangedValue is wrapped by a sink's error for a row whose
// Unchanged value it found nowhere: in no earlier row of its key, neither
// in the batch nor in the destination.
var ErrNoUnchangedValue = errors.New("no value for unchanged (TOASTed) column")

// UnchangedResolver is a Sink that resolves Unchanged values itself as it
// writes, failing with an error that wraps ErrNoUnchangedValue where it
// cannot. A sink without it passes them on (the Kafka publisher: its
// loader resolves them).
type UnchangedResolver interface {
	ResolvesUnchanged()
}

// LiveRebuilder is an Evolver whose shadow tables (see SwapTable) take
// Writes from the stream while a copy fills them from other goroutines, so
// that a table can be copied again beside the stream. Such a sink resolves
// Unchanged values from the rows stored in the table written (see
// UnchangedResolver). RebuildsLive reports whether it can now (not on a
// cluster, say).
type LiveRebuilder interface {
	RebuildsLive() bool
}

// HasUnchanged reports whether vals holds an Unchanged value.
func HasUnchanged(vals []any) bool {
	for _, v := range vals {
		if v == Unchanged {
			return true
		}
	}
	return false
}

// Row is one version of one row, bound for the destination.
type Row struct {
	// Values holds one value per column of the batch's TableMap, converted
	// by schema.ColumnMap.Convert; nil is NULL. For a deleted row only the
	// key columns matter; the others hold ColumnMap.Zero().
	Values []any
	// Version grows with every change of a row: the change's WAL position;
	// 0 for rows of the initial snapshot, and for those of a copy taken
	// while the stream runs a position below every change not in the copy.
	Version uint64
	// Seq tells apart rows of an append-only table that share a Version:
	// a copy's rows count from 1; a change's rows from 0 among those at
	// one WAL position (a multi-insert record, as COPY FROM writes, holds
	// many). Unused for keyed tables.
	Seq uint64
	// RowKey identifies a row of a FullRow table (schema.Table.FullRow): a
	// hash of schema.AppendEncoded of all its values. Unused for other tables.
	RowKey  string
	Deleted bool
	// TxID and CommitMicros identify the PostgreSQL transaction of a
	// change: its xid and its commit time in Unix microseconds (from the
	// pgoutput Begin message). Both are 0 for rows of the initial snapshot.
	// Sinks that carry change metadata (Kafka) use them; ClickHouse ignores them.
	TxID         uint32
	CommitMicros int64
	// Inserted marks a streamed row that pgoutput sent as an insert (not an
	// update); Old is the row before an update or delete when pgoutput sent
	// it whole (REPLICA IDENTITY FULL), indexed like Values, else nil. Sinks
	// that describe changes (Kafka's Debezium envelope) use them; ClickHouse
	// ignores them.
	Inserted bool
	Old      []any
}

// Batch is a run of rows of one table in stream order.
type Batch struct {
	Table *schema.TableMap
	Rows  []Row
}

// Sink is where batches go. Calls come from one goroutine.
type Sink interface {
	// Prepare makes sure the destination can take rows of these tables:
	// it creates the database and any missing table. It is idempotent.
	Prepare(ctx context.Context, tables []*schema.TableMap) error
	// Write stores the batch durably: when it returns nil every row is in
	// the destination, and a crash after that loses none of them. Rows are
	// applied in order, so a later row of a key wins over an earlier one.
	// Write resolves Unchanged values before it writes.
	Write(ctx context.Context, b *Batch) error
	// Truncate removes every row of the table; rows written after it
	// returns are kept.
	Truncate(ctx context.Context, t *schema.TableMap) error
	// Close releases the connection. Nothing buffered is lost: Write does
	// not buffer.
	Close() error
}

// CopyStarter is a Sink that tells the truncation that starts a copy of a
// table from a TRUNCATE of the source: the Kafka sink publishes a
// TRUNCATE as an event its consumers see, a copy's start as a record only
// ferry's loader acts on. The replicator calls StartCopy, when the sink has
// it, where it would call Truncate before a copy; it guarantees what
// Truncate does.
type CopyStarter interface {
	StartCopy(ctx context.Context, t *schema.TableMap) error
}

// SnapshotState is what the destination remembers of a slot's initial copy.
type SnapshotState struct {
	// Done is true once every table's rows of the snapshot are stored.
	Done bool
	// LSN is the slot's consistent point the snapshot was taken at.
	LSN string
}

// SnapshotStore keeps SnapshotState next to the data it describes, so that a
// copy interrupted by a crash is known to be incomplete and is redone.
type SnapshotStore interface {
	// SnapshotState returns the last state set for the slot; the zero
	// SnapshotState when none was.
	SnapshotState(ctx context.Context, slot string) (SnapshotState, error)
	// SetSnapshotState records st for the slot durably; the latest call wins.
	SetSnapshotState(ctx context.Context, slot string, st SnapshotState) error
}

// Evolver is a Sink that can change its tables' shape while rows flow.
// The caller flushes every pending row of a table before calling any of
// these for it.
type Evolver interface {
	// AlterTable applies in-place changes (schema.InPlace) to a table,
	// in order.
	AlterTable(ctx context.Context, tm *schema.TableMap, changes []schema.ColumnChange) error
	// RenameTable gives the table from.Name the name to.Name.
	RenameTable(ctx context.Context, from, to *schema.TableMap) error
	// SwapTable replaces the table target.Name with shadow, a complete
	// copy written under another name, and drops the old table. A reader
	// sees either the old table or the new one.
	SwapTable(ctx context.Context, target, shadow *schema.TableMap) error
	// Matches reports whether the table exists and has the mapping's columns.
	Matches(ctx context.Context, tm *schema.TableMap) (exists, matches bool, err error)
	// Replace puts an empty table of the mapping in place of the existing one.
	Replace(ctx context.Context, tm *schema.TableMap) error
}

// TableStateStore keeps, next to the data, the source description each
// destination table was last made to match. After a restart the stream
// replays from an earlier position than the catalog shows, so schema
// changes are diffed against this, not against the catalog.
type TableStateStore interface {
	// TableStates returns the last state set for each table (by OID).
	TableStates(ctx context.Context, slot string) (map[uint32][]byte, error)
	// SetTableState records a table's state durably; the latest call wins.
	SetTableState(ctx context.Context, slot string, oid uint32, state []byte) error
}
