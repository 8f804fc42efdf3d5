package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

// connFlags are the connection settings every command shares.
type connFlags struct {
	PG             string `name:"pg" help:"PostgreSQL connection URL. TLS: sslmode=verify-full&sslrootcert=<CA file> (libpq's parameters)." env:"FERRY_PG_URL" required:""`
	PGPassword     string `name:"pg-password" help:"PostgreSQL password, when not in --pg (prefer the env var or a file: a flag shows in ps). PGPASSWORD and ~/.pgpass (PGPASSFILE) work too." env:"FERRY_PG_PASSWORD"`
	PGPasswordFile string `name:"pg-password-file" help:"File whose first line is the PostgreSQL password." env:"FERRY_PG_PASSWORD_FILE" placeholder:"FILE"`
	CH             string `name:"ch" help:"ClickHouse native-protocol URL, e.g. clickhouse://default@127.0.0.1:9000 (not needed by ferry run --sink kafka); ?secure=true for TLS." env:"FERRY_CH_URL"`
	chSecretFlags
	CHDatabase string `name:"ch-database" help:"ClickHouse database (created when missing). Default: the PostgreSQL database's name." env:"FERRY_CH_DATABASE"`
	CHCluster  string `name:"ch-cluster" help:"ClickHouse cluster: DDL ON CLUSTER, ReplicatedReplacingMergeTree <table>_local tables and a Distributed <table> over them." env:"FERRY_CH_CLUSTER"`
}

// tableFlags choose what to replicate.
type tableFlags struct {
	Tables      []string `help:"Tables to replicate (schema.table,...). Default: the publication's tables, else every table with a replica identity." env:"FERRY_TABLES"`
	Slot        string   `help:"Replication slot." default:"ferry" env:"FERRY_SLOT"`
	Publication string   `help:"Publication (created when missing)." default:"ferry" env:"FERRY_PUBLICATION"`
	AppendOnly  []string `name:"append-only" help:"Tables to replicate insert-only (no replica identity needed)." env:"FERRY_APPEND_ONLY"`
	TextColumns []string `name:"text-columns" help:"Columns (schema.table.column,...) to replicate as String in PostgreSQL's text form." env:"FERRY_TEXT_COLUMNS"`
	// Filters apply in the publication, so they need PostgreSQL 15.
	ExcludeColumns []string `name:"exclude-columns" help:"Columns (schema.table.column,...) left out of the publication's column list: their values never leave PostgreSQL (PostgreSQL 15+)." env:"FERRY_EXCLUDE_COLUMNS"`
	Nullable       string   `help:"Columns that may hold NULL: keep (Nullable ClickHouse types), or default-values (plain types, a NULL becoming the type's default: 0, '', the epoch, an empty array; ferry verify compares with the same mapping). Direct ClickHouse sink only." default:"keep" enum:"keep,default-values" env:"FERRY_NULLABLE"`
	JSONType       string   `name:"json-type" help:"ClickHouse type of json and jsonb columns: string (String holding PostgreSQL's exact text), or json (ClickHouse's JSON type, queryable by path, ClickHouse 25.3+; a value it would not store exactly, such as a null member, a key with a dot or a number beyond Float64, stops ferry naming the column; ferry verify compares the JSON values). Key columns and arrays stay String. Direct ClickHouse sink only." default:"string" enum:"string,json" env:"FERRY_JSON_TYPE"`
	RowFilter      []string `name:"row-filter" sep:"none" help:"Rows to replicate of one table, 'schema.table:WHERE condition'; repeat the flag per table. The publication's row filter (PostgreSQL 15+); with UPDATE and DELETE it may use only replica identity columns." env:"FERRY_ROW_FILTER"`
}

type runCmd struct {
	connFlags
	tableFlags
	CatchUp      bool          `name:"catch-up" help:"Exit 0 once every transaction committed before the start is in ClickHouse."`
	RetryFor     time.Duration `name:"retry-for" help:"Give up once lost connections have been retried this long (a PostgreSQL not reached since the start is not retried). 0: for ever; with --catch-up 5m." default:"0s" env:"FERRY_RETRY_FOR"`
	CHFsync      bool          `name:"ch-fsync" help:"Make ClickHouse fsync every inserted part before the INSERT returns (fsync_after_insert, fsync_part_directory on ferry's tables), so a crash of the ClickHouse host cannot lose rows whose WAL ferry confirmed. Costs insert latency." env:"FERRY_CH_FSYNC"`
	CurrentViews bool          `name:"current-views" help:"Create, for each replicated ClickHouse table <t>, a view <t>_current of its live rows with the source columns only (FINAL, deleted rows left out; all rows of an append-only table), kept in step with schema changes." env:"FERRY_CURRENT_VIEWS"`
	BatchRows    int           `name:"batch-rows" help:"Flush when this many rows are pending." default:"50000" env:"FERRY_BATCH_ROWS"`
	BatchBytes   int           `name:"batch-bytes" help:"Flush when the pending rows hold this many bytes." default:"33554432" env:"FERRY_BATCH_BYTES"`
	BatchAge     time.Duration `name:"batch-age" help:"Flush when the oldest pending row waited this long." default:"300ms" env:"FERRY_BATCH_AGE"`
	BatchQuiet   time.Duration `name:"batch-quiet" help:"When the stream has nothing more to read, flush once this long has passed since the last flush (0: only --batch-age and the size limits flush)." default:"50ms" env:"FERRY_BATCH_QUIET"`
	CopyWorkers  int           `name:"copy-workers" help:"Connections the initial copy reads with at once: big tables in page ranges, one INSERT in flight each. 0: min(4, 2 x CPUs)." default:"0" env:"FERRY_COPY_WORKERS"`
	CopyText     bool          `name:"copy-text" help:"Read every table's initial copy in COPY's text format; by default a table whose column types all have a binary form ferry reads is copied in binary format, which costs PostgreSQL and ferry less CPU." env:"FERRY_COPY_TEXT"`
	StreamText   bool          `name:"stream-text" help:"Ask PostgreSQL for the stream's values in text form; by default (PostgreSQL 14 and later) they come in binary form when ferry reads every column of every replicated table in binary, which costs ferry, and the walsender for batched transactions, less CPU." env:"FERRY_STREAM_TEXT"`
	Streaming    string        `name:"streaming" help:"Receive transactions larger than the server's logical_decoding_work_mem while they run (PostgreSQL 14+), kept in --spill-dir until they commit: on, off, or auto (on where the server supports it)." default:"auto" enum:"auto,on,off" env:"FERRY_STREAMING"`
	TableShapes  tableShapes   `name:"table-shapes" help:"The layout of ClickHouse tables ferry makes, by schema.table: order_by (the key's columns in another order), partition_by (over key columns), ttl, settings, codecs. A mapping in the config file; YAML text on the command line. Applies when ferry makes the table (first copy, rebuild, ferry resync)." placeholder:"YAML" env:"FERRY_TABLE_SHAPES"`
	SpillDir     string        `name:"spill-dir" help:"Directory for the changes of streamed transactions waiting for their commit. Default: the system's temporary directory." env:"FERRY_SPILL_DIR"`
	opsFlags
	Sink string `help:"Where rows go: clickhouse, or kafka (Debezium envelopes; load them with ferry load --from-kafka)." default:"clickhouse" enum:"clickhouse,kafka" env:"FERRY_SINK"`
	kafkaPublishFlags
}

func (c *runCmd) Run(ctx context.Context, log *zap.Logger) error {
	if c.Sink == "kafka" {
		if c.Nullable != "keep" {
			return fmt.Errorf("--nullable=%s is for the direct ClickHouse sink: with --sink kafka the events carry NULLs as they are, "+
				"and ferry load makes the ClickHouse tables (drop --nullable or FERRY_NULLABLE)", c.Nullable)
		}
		if c.JSONType != "string" {
			return fmt.Errorf("--json-type=%s is for the direct ClickHouse sink: with --sink kafka the events carry json and jsonb as text, "+
				"and ferry load makes the ClickHouse tables with String columns (drop --json-type or FERRY_JSON_TYPE)", c.JSONType)
		}
		if len(c.TableShapes) > 0 {
			return fmt.Errorf("--table-shapes goes to whatever makes the ClickHouse tables: with --sink kafka that is ferry load, so give it there " +
				"(and remove table-shapes from ferry run's configuration, or FERRY_TABLE_SHAPES)")
		}
		return c.runKafka(ctx, log)
	}
	sink, err := openSink(ctx, c.connFlags, log, sinkOptions{fsync: c.CHFsync, views: c.CurrentViews})
	if err != nil {
		return err
	}
	defer sink.Close()
	if err := replicator.CheckJSONType(c.JSONType == "json", sink.Capabilities(), "ClickHouse "+sink.ServerVersion()); err != nil {
		return err
	}
	existed, err := sink.DatabaseExists(ctx)
	if err != nil {
		return err
	}
	obs := newObserver(newCopyProgress(log))
	rep, err := replicator.New(c.replicatorConfig(log, obs), sink, sink, sink.Capabilities(), clickhouse.IsRetryable)
	if err != nil {
		return err
	}
	err = c.runOps(ctx, rep, obs, log)
	if err != nil && !existed {
		err = dropUnused(sink, log, err)
	}
	return err
}

// dropUnused drops the ClickHouse database a failed run created, when it
// holds no row but the progress table's (a start that failed before the
// copy wrote anything or any state was kept), so that a wrong --pg or a missing
// privilege leaves nothing behind to clean up; it says so after err.
func dropUnused(sink *clickhouse.Sink, log *zap.Logger, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dropped, derr := sink.DropIfUnused(ctx)
	if derr != nil {
		log.Warn("could not drop the ClickHouse database this run created", zap.String("database", sink.Database()), zap.Error(derr))
		return err
	}
	if !dropped {
		return err
	}
	return fmt.Errorf("%w (ferry dropped ClickHouse database %s again: it created it at this start, and it held nothing)", err, sink.Database())
}

// replicatorConfig is the replicator's configuration from the flags.
func (c *runCmd) replicatorConfig(log *zap.Logger, obs *observer) replicator.Config {
	return replicator.Config{
		ConnString:     c.PG,
		Slot:           c.Slot,
		Publication:    c.Publication,
		Tables:         c.Tables,
		AppendOnly:     c.AppendOnly,
		TextColumns:    c.TextColumns,
		NullAsDefault:  c.Nullable == "default-values",
		NativeJSON:     c.JSONType == "json",
		ExcludeColumns: c.ExcludeColumns,
		RowFilters:     c.RowFilter,
		CatchUp:        c.CatchUp,
		RetryFor:       c.RetryFor,
		Batch:          replicator.BatchConfig{MaxRows: c.BatchRows, MaxBytes: c.BatchBytes, MaxAge: c.BatchAge, Quiet: c.BatchQuiet},
		CopyWorkers:    c.CopyWorkers,
		CopyText:       c.CopyText,
		StreamText:     c.StreamText,
		Logger:         log,
		Observer:       obs,
		Heartbeat:      c.Heartbeat,
		MaxRetainedWAL: int64(c.MaxRetainedWAL),
		Streaming:      c.Streaming,
		SpillDir:       c.SpillDir,
		Shapes:         c.TableShapes,
	}
}

// sinkOptions are the flags of ferry run that only it passes to the sink.
type sinkOptions struct {
	fsync bool // --ch-fsync
	views bool // --current-views
}

// chDatabase is the ClickHouse database of the flags: --ch-database, or
// else the PostgreSQL database's name.
func (c connFlags) chDatabase() (string, error) {
	if c.CHDatabase != "" {
		return c.CHDatabase, nil
	}
	cfg, err := pgconn.ParseConfig(c.PG)
	if err != nil {
		return "", fmt.Errorf("--pg: %s: %w", replicator.Redact(c.PG), err)
	}
	return cfg.Database, nil
}

// openSink connects to ClickHouse, into the database the flags name or
// else the one named like the PostgreSQL database.
func openSink(ctx context.Context, c connFlags, log *zap.Logger, o sinkOptions) (*clickhouse.Sink, error) {
	if c.CH == "" {
		return nil, fmt.Errorf("no ClickHouse URL: set --ch or FERRY_CH_URL (clickhouse://user@host:9000)")
	}
	db, err := c.chDatabase()
	if err != nil {
		return nil, err
	}
	sink, err := clickhouse.New(ctx, clickhouse.Config{DSN: c.CH, Database: db, Logger: log, Cluster: c.CHCluster,
		CAFile: c.CHCAFile, Password: c.chPassword, Fsync: o.fsync, CurrentViews: o.views})
	if err != nil {
		return nil, err
	}
	log.Info("connected to ClickHouse", zap.String("version", sink.ServerVersion()), zap.String("database", sink.Database()))
	return sink, nil
}
