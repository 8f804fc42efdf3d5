package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/internal/tlsfail"
	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

var (
	_ loader.Sink          = (*Sink)(nil)
	_ loader.SnapshotStore = (*Sink)(nil)
)

// Config says which ClickHouse to write to. The zero value of every field
// but DSN means its default.
type Config struct {
	// DSN is required: clickhouse://user:password@host:port/database?setting=value.
	// The port is ClickHouse's native TCP port (9000 by default), not the
	// HTTP one. Query parameters are clickhouse-go's (compress, dial_timeout,
	// secure, ...) or ClickHouse settings.
	DSN string
	// Database is where the tables go. Default: the DSN's database, or
	// "default" when the DSN names none. It is created by Prepare.
	Database string
	// Logger receives the sink's messages, with component=clickhouse.
	// Default: zap.NewNop().
	Logger *zap.Logger
	// LookupChunk is how many keys one query for Unchanged values asks
	// for. Default: 1000.
	LookupChunk int
	// Cluster, when set, is the ClickHouse cluster (remote_servers) the
	// tables go to: DDL runs ON CLUSTER, each table is a
	// ReplicatedReplacingMergeTree <table>_local on every server and a
	// Distributed table <table> over them (schema.ClusterDDL), and inserts
	// go to the Distributed table with insert_distributed_sync=1. ferry's
	// own state tables are replicated to every server of the cluster.
	Cluster string
	// CAFile is a PEM file of the CAs that signed the server's certificate.
	// Setting it turns TLS on, as secure=true in the DSN does, and makes
	// those CAs the only ones trusted. Default: none; with secure=true the
	// system's CAs are trusted.
	CAFile string
	// Fsync makes every table ferry writes (its own state tables too) fsync
	// each inserted part and its directory before the INSERT returns
	// (MergeTree's fsync_after_insert and fsync_part_directory), so that a
	// crash of the ClickHouse host cannot lose rows whose WAL ferry has
	// confirmed. It costs insert latency; see docs/OPERATIONS.md, "What a crash loses".
	// Refused where the server lacks the settings. Default: off, as in
	// ClickHouse.
	Fsync bool
	// Password, when set, is used instead of a password in the DSN (which
	// must then have none), e.g. read from a file. It never appears in a
	// message. Default: the DSN's.
	Password string
	// CurrentViews makes Prepare create, for each replicated table <t>, a
	// view <t>_current of its live rows with the source columns only
	// (schema.CurrentViewSelect), and keeps it in step with the table's
	// column changes, renames and rebuilds. Not supported with Cluster.
	// Default: off.
	CurrentViews bool
	// SharedTables says that other processes write into the same tables
	// while this sink does (the loaders of one ferry load group): Truncate
	// then never swaps in an empty table, whose swap would lose their rows
	// written in between, and leaves ClickHouse 18.16's TRUNCATE as it is
	// (see Truncate). Default: off, the sink is the tables' only writer.
	SharedTables bool
	// Clock is read for the updated column of ferry's state tables.
	// Default: time.Now.
	Clock func() time.Time
}

// Sink writes batches into the ClickHouse tables of one database. Its
// methods are meant to be called from one goroutine, as loader.Sink says.
type Sink struct {
	conn    driver.Conn
	db      string
	host    string
	log     *zap.Logger
	cluster string
	caps    schema.Capabilities
	fsync   bool // Config.Fsync
	views   bool // Config.CurrentViews
	shared  bool // Config.SharedTables
	version string
	chunk   int
	red     redactor
	// ready holds the state tables known to exist.
	ready  map[string]bool
	closed bool
	// lastUpdated is the last updated value of a state row written or, once
	// updatedRead, read back (see nextUpdated).
	lastUpdated uint64
	updatedRead bool
	now         func() time.Time // Config.Clock
}

// New connects to ClickHouse, checks that it answers and reads its version,
// which decides the Capabilities the mapping may use.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	if cfg.DSN == "" {
		return nil, errors.New("clickhouse: no DSN given (want clickhouse://user:password@host:9000/database)")
	}
	red := newRedactor(cfg.DSN)
	opts, err := ch.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, red.wrap(err, "clickhouse: parse DSN %s", red.dsn())
	}
	if cfg.Password != "" {
		if opts.Auth.Password != "" {
			return nil, fmt.Errorf("clickhouse: DSN %s has a password and one is given apart (a password file or FERRY_CH_PASSWORD): give one", red.dsn())
		}
		opts.Auth.Password = cfg.Password
		red.password = cfg.Password
	}
	if err := applyTLS(opts, cfg); err != nil {
		return nil, err
	}
	setDialer(opts)
	if opts.Protocol != ch.Native {
		return nil, fmt.Errorf("clickhouse: DSN %s uses the HTTP protocol; ferry needs the native one: "+
			"use clickhouse://host:9000 (the native TCP port)", red.dsn())
	}
	if cfg.Cluster != "" && cfg.CurrentViews {
		return nil, errors.New("clickhouse: current-state views (--current-views) are not supported with a cluster (--ch-cluster) yet")
	}
	if cfg.Cluster != "" {
		// An insert into a Distributed table returns once every shard has
		// its rows, not once they are queued on this server's disk: ferry
		// confirms WAL to PostgreSQL after the insert returns, and a queued
		// insert lost with this server would be lost for good.
		if opts.Settings == nil {
			opts.Settings = ch.Settings{}
		}
		opts.Settings["insert_distributed_sync"] = 1
	}
	s := &Sink{
		fsync:   cfg.Fsync,
		views:   cfg.CurrentViews,
		shared:  cfg.SharedTables,
		cluster: cfg.Cluster,
		db:      cfg.Database,
		host:    strings.Join(opts.Addr, ","),
		log:     cfg.Logger,
		chunk:   cfg.LookupChunk,
		red:     red,
		now:     cfg.Clock,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.db == "" {
		s.db = opts.Auth.Database
	}
	if s.db == "" {
		s.db = "default"
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.log = s.log.With(zap.String("component", "clickhouse"))
	if s.chunk <= 0 {
		s.chunk = 1000
	}
	// The database may not exist yet (Prepare creates it), and ClickHouse
	// refuses a connection to a missing database: connect to the user's
	// default one and qualify every name instead.
	opts.Auth.Database = ""
	conn, err := ch.Open(opts)
	if err != nil {
		return nil, red.wrap(err, "clickhouse: open connection to %s", s.host)
	}
	s.conn = conn
	if err := s.connect(ctx, opts.Auth.Username, opts.TLS != nil); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if s.fsync {
		if err := s.checkFsync(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	if s.cluster != "" {
		if err := s.checkClusterSettings(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	s.log.Info("connected", zap.String("host", s.host), zap.String("database", s.db),
		zap.String("server_version", s.version))
	return s, nil
}

// connect pings the server and reads its version.
func (s *Sink) connect(ctx context.Context, user string, secure bool) error {
	if err := s.conn.Ping(ctx); err != nil {
		var te *tlsfail.Error
		if err = explainTLS(err, s.host, secure); errors.As(err, &te) {
			return s.red.wrap(err, "clickhouse: connect to %s", s.host)
		}
		if user == "" {
			user = "default"
		}
		return s.red.wrap(err, "clickhouse: cannot reach %s as user %q: check the address in --ch (FERRY_CH_URL): is ClickHouse running there, "+
			"is that its native TCP port (9000 by default, not the HTTP port 8123), and are the user and password right?",
			s.host, user)
	}
	v, err := s.conn.ServerVersion()
	if err != nil {
		return s.red.wrap(err, "clickhouse: read server version of %s", s.host)
	}
	s.version = fmt.Sprintf("%d.%d.%d", v.Version.Major, v.Version.Minor, v.Version.Patch)
	s.caps = schema.CapabilitiesFor(int(v.Version.Major), int(v.Version.Minor))
	return nil
}

// Capabilities are the features of the connected server, for schema.Map.
func (s *Sink) Capabilities() schema.Capabilities { return s.caps }

// ServerVersion is the connected server's version, e.g. "23.8.2".
func (s *Sink) ServerVersion() string { return s.version }

// Database is the database the sink writes to.
func (s *Sink) Database() string { return s.db }

// Close releases the connections. Write does not buffer, so nothing is lost.
func (s *Sink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.conn.Close()
	if err != nil {
		return s.red.wrap(err, "clickhouse: close connection to %s", s.host)
	}
	return nil
}

// table is the sink's qualified, quoted name of a table.
func (s *Sink) table(name string) string {
	return schema.QuoteCH(s.db) + "." + schema.QuoteCH(name)
}

// exec runs one statement; what names the statement in the error.
func (s *Sink) exec(ctx context.Context, query, what string) error {
	if err := s.conn.Exec(ctx, query); err != nil {
		return s.red.wrap(err, "clickhouse: %s", what)
	}
	return nil
}
