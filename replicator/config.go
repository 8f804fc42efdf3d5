package replicator

import (
	"fmt"
	"runtime"
	"time"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// Config says what to replicate and how. The zero value of every field but
// ConnString means its default.
type Config struct {
	// ConnString is the PostgreSQL connection URL or DSN. Required.
	ConnString string
	// Slot is the logical replication slot's name. Default "ferry".
	Slot string
	// Publication is the publication's name. Default "ferry". Tables
	// replicated append-only go through a second publication named
	// Publication + "_append" that publishes inserts only.
	Publication string
	// Tables lists "schema.table" names to replicate. Default: the
	// publication's tables when it exists, else every table of the
	// database's user schemas that has a replica identity.
	Tables []string
	// AppendOnly lists "schema.table" names replicated insert-only, which
	// needs no replica identity. Default none.
	AppendOnly []string
	// NullAsDefault maps nullable columns to non-Nullable ClickHouse types,
	// a NULL becoming the type's default (schema.Table.NullAsDefault).
	NullAsDefault bool
	// NativeJSON maps json and jsonb columns to ClickHouse's JSON type
	// (schema.Table.NativeJSON), which needs ClickHouse 25.3: New refuses
	// it on older servers. Default false: String holding the exact text.
	NativeJSON bool
	// TextColumns lists "schema.table.column" names sent as String in
	// PostgreSQL's text form, whatever their type. Default none.
	TextColumns []string
	// ExcludeColumns lists "schema.table.column" names left out of the
	// publication's column list, so their values never leave PostgreSQL and
	// the ClickHouse table lacks them. PostgreSQL 15 and later. Default none.
	ExcludeColumns []string
	// RowFilters lists "schema.table:WHERE condition" entries, one per
	// table: the publication's row filter and the copies' condition.
	// PostgreSQL 15 and later. Default none.
	RowFilters []string
	// Shapes are, by "schema.table", the layouts of ClickHouse tables
	// ferry makes (ORDER BY, PARTITION BY, TTL, settings, codecs). Default
	// ferry's own.
	Shapes map[string]schema.Shape
	// CatchUp makes Run return nil once every transaction committed before
	// it started is stored. Default false: stream until ctx is done.
	CatchUp bool
	// StandbyInterval is how often a status update goes to PostgreSQL.
	// Default 10s; capped at 3/4 of the server's wal_sender_timeout.
	StandbyInterval time.Duration
	// ServerSilence is how long the stream waits without any message from
	// PostgreSQL before it takes the connection as lost and connects again.
	// After StandbyInterval of silence ferry asks the walsender for an
	// answer, which a live one sends at once, so only a dead connection
	// (a network that drops packets without resetting connections) stays
	// silent this long. Default: twice the server's wal_sender_timeout and
	// at least 60s (10 minutes when the server's timeout is off, as a busy
	// walsender then sends nothing unasked); never under 3 StandbyIntervals.
	ServerSilence time.Duration
	// Batch sets how rows are grouped into INSERTs.
	Batch BatchConfig
	// CopyWorkers is how many connections the initial copy reads with at
	// once, each with one INSERT in flight (when the sink takes concurrent
	// writes). A table of at least 8 MiB is read in that many page ranges
	// (PostgreSQL 14 and later); smaller tables are copied side by side.
	// Each worker holds up to one batch (Batch.MaxRows, Batch.MaxBytes) in
	// memory. Default min(4, 2*GOMAXPROCS); 1 copies one table at a time on
	// one connection.
	CopyWorkers int
	// CopyText makes the initial copy read every table in COPY's text
	// format. By default a table whose columns all have a binary reader
	// (schema.ColumnMap.Binary: integers, floats, bool, numeric, text
	// types, json, jsonb, bytea, uuid, date, time, timestamps and enums) is read
	// in binary format, which PostgreSQL writes and ferry reads with less
	// work; the values are the same.
	CopyText bool
	// StreamText makes the stream ask pgoutput for every value in text
	// form. By default, on PostgreSQL 14 and later, it asks for binary form
	// when every column of every replicated table has a binary reader (as
	// for CopyText), which spares the walsender the types' text output; a
	// table with another column that joins or changes later starts the
	// stream again in text.
	StreamText bool
	// Logger receives progress and warnings. Default zap.NewNop().
	Logger *zap.Logger
	// Observer is told about changes, flushes and positions, for metrics.
	// Default NopObserver. If it also implements SlotObserver, it is told
	// what the slot watcher sees.
	Observer Observer
	// Heartbeat is how often a ferry.heartbeat message is written to the
	// WAL while streaming, so that a quiet database's slot still advances
	// and lag can be measured end to end. Default 0: no heartbeats.
	Heartbeat time.Duration
	// SlotWatch is how often the slot's retained WAL and health are read
	// while Run runs. Default 10s.
	SlotWatch time.Duration
	// MaxRetainedWAL is the retained WAL, in bytes, above which the slot
	// watcher warns. Default 0: no warning.
	MaxRetainedWAL int64
	// SlotBusyTimeout is how long ferry keeps retrying while another
	// connection holds the slot (its own previous walsender, which the
	// server has not yet seen go, or another consumer) before it fails
	// naming the holder. Default 2 minutes: a walsender whose client
	// vanished without closing the connection lasts wal_sender_timeout
	// (60s by default).
	SlotBusyTimeout time.Duration
	// RetryFor is how long Run retries lost connections before it gives
	// up with the last error, counted from the first failure since a cycle
	// that ran for a minute. A PostgreSQL never reached since Run started
	// is not retried at all. Default: 5 minutes with CatchUp, so that a
	// script or cron job ends; else 0, for ever.
	RetryFor time.Duration
	// Streaming says whether PostgreSQL streams transactions still in
	// progress (pgoutput protocol version 2) once they outgrow its
	// logical_decoding_work_mem, instead of spilling them to its own disk
	// and sending them after their commit: StreamingOn, StreamingAuto (on
	// where the server is PostgreSQL 14 or later) or StreamingOff. Either
	// way a transaction's rows reach the sink only after it commits.
	// Default StreamingAuto: with it a 10M-row transaction was in
	// ClickHouse a third sooner after its commit, as PostgreSQL had decoded
	// it while it ran, for a fifth more of ferry's CPU; memory is the same.
	Streaming string
	// SpillDir is where the changes of a streamed transaction wait for its
	// commit, one unlinked temporary file per transaction. Default
	// os.TempDir().
	SpillDir string
}

// BatchConfig bounds the rows held before they are written. A flush writes
// every table's pending rows, one INSERT per table.
type BatchConfig struct {
	// MaxRows flushes when this many rows are pending. Default 50000.
	MaxRows int
	// MaxBytes flushes when the pending values' text adds up to this many
	// bytes. Default 32 MiB.
	MaxBytes int
	// MaxAge flushes when the oldest pending row waited this long.
	// Default 300ms, so a quiet stream is visible within a second.
	MaxAge time.Duration
	// Quiet, when above zero, flushes as soon as the stream has nothing
	// more to read between two transactions, once this long has passed
	// since the last flush: a trickle is visible in about this time, and
	// at most one flush in this time writes each table (MaxAge and the
	// size limits still flush a stream that never pauses). Zero leaves it
	// off; `ferry run` sets 50ms.
	Quiet time.Duration
}

func (c Config) withDefaults() Config {
	if c.Slot == "" {
		c.Slot = "ferry"
	}
	if c.Publication == "" {
		c.Publication = "ferry"
	}
	if c.StandbyInterval <= 0 {
		c.StandbyInterval = 10 * time.Second
	}
	if c.Batch.MaxRows <= 0 {
		c.Batch.MaxRows = 50000
	}
	if c.Batch.MaxBytes <= 0 {
		c.Batch.MaxBytes = 32 << 20
	}
	if c.Batch.MaxAge <= 0 {
		c.Batch.MaxAge = 300 * time.Millisecond
	}
	if c.SlotBusyTimeout <= 0 {
		c.SlotBusyTimeout = 2 * time.Minute
	}
	if c.RetryFor <= 0 && c.CatchUp {
		c.RetryFor = 5 * time.Minute
	}
	if c.CopyWorkers <= 0 {
		c.CopyWorkers = min(4, 2*runtime.GOMAXPROCS(0))
	}
	if c.SlotWatch <= 0 {
		c.SlotWatch = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	if c.Streaming == "" {
		c.Streaming = StreamingAuto
	}
	return c
}

// CheckJSONType refuses Config.NativeJSON for a ClickHouse server without
// the JSON type (caps.JSON false), whose version is server: the error names
// the flag, the version and the fix.
func CheckJSONType(nativeJSON bool, caps schema.Capabilities, server string) error {
	if !nativeJSON || caps.JSON {
		return nil
	}
	return fmt.Errorf("--json-type=json needs ClickHouse 25.3 or later for its JSON type, and the server is %s; "+
		"fix: --json-type=string (json and jsonb as String holding the exact text), or upgrade ClickHouse", server)
}
