package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/replicator"
)

// DefaultKeySeed is the recorded ChaCha8 seed when Config.KeySeed is 0.
const DefaultKeySeed = 20261201

// Config says what to benchmark. The zero value of every field but
// ConnString means its default.
type Config struct {
	// ConnString is the PostgreSQL URL. Required.
	ConnString string
	// Strategies to run, by name. Default: all that the server supports.
	Strategies []string
	// Workloads to run. Default: all of Workloads.
	Workloads []string
	// Clients lists the client counts; more than one is a sweep. Default [40].
	Clients []int
	// Duration of each timed run. Default 20s.
	Duration time.Duration
	// SeedRows is how many rows each table holds before the first run.
	// Default 3,000,000.
	SeedRows int
	// Runs is how many times each combination runs. Default 3.
	Runs int
	// BatchRows is the rows per transaction of insert-batch. Default 100.
	BatchRows int
	// Partitions is hash8's partition count. Default 8.
	Partitions int
	// PayloadBytes adds a text column of that width. Default 0: none.
	PayloadBytes int
	// KeySeed seeds every client-side key stream. Default DefaultKeySeed.
	KeySeed uint64
	// SynchronousCommit is set on the load connections. Default "off", as
	// in the seeds' harness: with it on, WAL flush dominates and hides the
	// index's behaviour.
	SynchronousCommit string
	// WithCDC runs an in-process replicator on the same WAL and measures
	// its lag. Default false.
	WithCDC bool
	// ClickHouseURL makes WithCDC write to ClickHouse. Default "": a null
	// sink.
	ClickHouseURL string
	// NoCheckpoint skips the CHECKPOINT before each run. Default false: a
	// checkpoint first, so every run pays full-page images from the same
	// starting point.
	NoCheckpoint bool
	// Slot is WithCDC's replication slot, which unlike the schema is the
	// server's, not the database's. Default "ferry_bench".
	Slot string
	// Keep leaves the schema and its tables in place. Default false.
	Keep bool
	// Clock is the key generators' clock. Default: a synthetic clock per
	// run, shared by its clients, that starts at ClockStart and steps 1 ms
	// every KeysPerMillisecond keys, so time-ordered keys do not depend on
	// the machine's speed.
	Clock Clock
	// KeysPerMillisecond is the synthetic clock's rate. Default 20.
	KeysPerMillisecond int
	// WALDump is the pg_waldump binary of the server's major version, used
	// to count each window's WAL. Default "": none, and WAL figures come
	// from pg_stat_wal, marked approximate.
	WALDump string
	// WALSource forces where WAL figures come from: "" (pg_waldump when it
	// can read the server's WAL, else pg_stat_wal), WALSourceWALDump (fail
	// when it cannot) or "pg_stat_wal". Default "".
	WALSource string
	// SelfCheck reads every window's WAL a second time through pg_waldump
	// --stats and --fullpage and fails the run on a difference above 1%.
	// Default false.
	SelfCheck bool
	// KeepDisturbed keeps, marked, a run that had a checkpoint, an
	// autovacuum or other databases' WAL in its window. Default false:
	// such a run is discarded with the reason.
	KeepDisturbed bool
	// Progress is told before each timed run. Default: nothing.
	Progress func(done, total int, what string)
	// Logger. Default zap.NewNop().
	Logger *zap.Logger
}

// Quick returns c with the small sizes of `--quick`: every strategy and
// workload, 2 clients, 0.8 s runs, 10k seed rows, one run each.
func (c Config) Quick() Config {
	c.Clients = []int{2}
	c.Duration = 800 * time.Millisecond
	c.SeedRows = 10_000
	c.Runs = 1
	return c
}

func (c Config) withDefaults() Config {
	if c.Slot == "" {
		c.Slot = "ferry_bench"
	}
	if len(c.Workloads) == 0 {
		c.Workloads = Workloads
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{40}
	}
	if c.Duration <= 0 {
		c.Duration = 20 * time.Second
	}
	if c.SeedRows <= 0 {
		c.SeedRows = 3_000_000
	}
	if c.Runs <= 0 {
		c.Runs = 3
	}
	if c.BatchRows <= 0 {
		c.BatchRows = 100
	}
	if c.Partitions <= 0 {
		c.Partitions = 8
	}
	if c.KeySeed == 0 {
		c.KeySeed = DefaultKeySeed
	}
	if c.SynchronousCommit == "" {
		c.SynchronousCommit = "off"
	}
	if c.KeysPerMillisecond <= 0 {
		c.KeysPerMillisecond = 20
	}
	if c.Progress == nil {
		c.Progress = func(int, int, string) {}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

func (c Config) validate() error {
	if c.ConnString == "" {
		return errors.New("no PostgreSQL URL: set --pg or FERRY_PG_URL")
	}
	for _, w := range c.Workloads {
		if !slices.Contains(Workloads, w) {
			return fmt.Errorf("unknown workload %q: choose from %s", w, strings.Join(Workloads, ", "))
		}
	}
	for _, n := range c.Clients {
		if n < 1 || n > maxClients {
			return fmt.Errorf("client count %d: must be 1 to %d", n, maxClients)
		}
	}
	if c.Runs > maxRuns {
		return fmt.Errorf("runs %d: at most %d", c.Runs, maxRuns)
	}
	switch c.WALSource {
	case "", WALSourceWALDump, "pg_stat_wal":
	default:
		return fmt.Errorf("WAL source %q: use pg_waldump or pg_stat_wal", c.WALSource)
	}
	if c.SelfCheck && c.WALSource == "pg_stat_wal" {
		return errors.New("the self-check compares with pg_waldump: it cannot run with pg_stat_wal as the source")
	}
	switch c.SynchronousCommit {
	case "on", "off", "local", "remote_write", "remote_apply":
	default:
		return fmt.Errorf("synchronous_commit %q: use on, off, local, remote_write or remote_apply", c.SynchronousCommit)
	}
	return nil
}

// Limits that keep every run's key streams apart.
const (
	maxClients = 4096
	maxRuns    = 1024
)

// bencher holds one invocation's state.
type bencher struct {
	cfg        Config
	log        *zap.Logger
	db         *pgxpool.Pool // admin and sampling connections
	res        *Results
	hasStatWAL bool
	wal        *walReader // nil: WAL figures from pg_stat_wal
	done       int
	total      int
	app        string // application_name of the admin connections
	loadApp    string // application_name of the load connections
}

// Run runs the benchmark and returns what it measured. A run whose sanity
// check fails is kept in the results as discarded; Run fails only when the
// benchmark itself cannot go on.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &bencher{cfg: cfg, log: cfg.Logger.With(zap.String("component", "bench"))}
	b.app = fmt.Sprintf("%s-%d", appPrefix, os.Getpid())
	b.loadApp = b.app + "-load"
	db, err := b.adminPool(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	b.db = db
	strategies, err := b.prepare(ctx)
	if err != nil {
		return nil, err
	}
	b.total = len(strategies) * len(cfg.Workloads) * len(cfg.Clients) * cfg.Runs
	for _, s := range strategies {
		if err := b.strategy(ctx, s); err != nil {
			return b.res, fmt.Errorf("strategy %s: %w", s.Name, err)
		}
	}
	if !cfg.Keep {
		if err := b.dropCDC(ctx); err != nil {
			return b.res, err
		}
		if _, err := db.Exec(ctx, "DROP SCHEMA IF EXISTS "+Schema+" CASCADE"); err != nil {
			return b.res, fmt.Errorf("drop schema %s: %w", Schema, err)
		}
	}
	b.res.Finished = time.Now().UTC()
	return b.res, nil
}

func (b *bencher) adminPool(ctx context.Context) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(b.cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("--pg %s: %w", replicator.Redact(b.cfg.ConnString), err)
	}
	pc.MaxConns = 6
	pc.ConnConfig.RuntimeParams["application_name"] = b.app
	db, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", replicator.Redact(b.cfg.ConnString), err)
	}
	if err := db.Ping(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to %s: %w", replicator.Redact(b.cfg.ConnString), err)
	}
	return db, nil
}

// prepare reads the settings, installs the extensions, recreates the
// schema and picks the strategies the server can run.
func (b *bencher) prepare(ctx context.Context) ([]Strategy, error) {
	settings, err := readSettings(ctx, b.db)
	if err != nil {
		return nil, err
	}
	b.hasStatWAL = settings.ServerVersionNum >= 140000
	b.res = &Results{Machine: readMachine(settings), Settings: settings, Started: time.Now().UTC()}
	if err := b.checkAlone(ctx); err != nil {
		return nil, err
	}
	if err := b.openWAL(ctx); err != nil {
		return nil, err
	}
	if settings.FullPageWrites != "on" {
		b.res.Warnings = append(b.res.Warnings, "full_page_writes is "+settings.FullPageWrites+": the WAL holds no full-page images, FPI figures are 0")
	}
	for _, q := range []string{
		"CREATE EXTENSION IF NOT EXISTS pgstattuple",
		"CREATE EXTENSION IF NOT EXISTS pg_buffercache",
		"CREATE EXTENSION IF NOT EXISTS pageinspect",
		"DROP SCHEMA IF EXISTS " + Schema + " CASCADE",
		"CREATE SCHEMA " + Schema,
	} {
		if _, err := b.db.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("prepare: %s: %w", q, err)
		}
	}
	if b.cfg.WithCDC {
		if settings.WALLevel != "logical" {
			return nil, fmt.Errorf("--with-cdc needs wal_level = logical (it is %s): set it and restart PostgreSQL", settings.WALLevel)
		}
		if err := b.dropCDC(ctx); err != nil {
			return nil, err
		}
	}
	strategies, err := b.pickStrategies(ctx)
	if err != nil {
		return nil, err
	}
	b.res.Params = b.params(strategies)
	return strategies, nil
}

// openWAL decides where the WAL figures come from and records why.
func (b *bencher) openWAL(ctx context.Context) error {
	if b.cfg.WALSource == "pg_stat_wal" {
		b.res.WALSource, b.res.WALSourceNote = WALSourceStatWAL, "asked for"
		return nil
	}
	w, why := openWALReader(ctx, b.db, b.cfg.WALDump, b.res.Settings.ServerVersionNum)
	if w == nil {
		if b.cfg.WALSource == WALSourceWALDump || b.cfg.SelfCheck {
			return fmt.Errorf("pg_waldump cannot read the server's WAL: %s", why)
		}
		b.res.WALSource, b.res.WALSourceNote = WALSourceStatWAL, why
		b.log.Warn("WAL figures from pg_stat_wal, approximate", zap.String("why", why))
		return nil
	}
	b.wal = w
	b.res.WALSource, b.res.WALSourceNote = WALSourceWALDump, w.bin+" on "+w.dir
	return nil
}

// ErrBusy is returned when another benchmark runs against the server.
var ErrBusy = errors.New("another ferry bench is running against this database or slot")

// checkAlone refuses to start while another benchmark uses the database
// or the slot: this one would drop its schema and slot under it.
func (b *bencher) checkAlone(ctx context.Context) error {
	var others int
	var slotActive bool
	err := b.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name LIKE $1 || '%' AND application_name NOT LIKE $2 || '%'),
		EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $3 AND active)`,
		appPrefix, b.app, b.cfg.Slot).Scan(&others, &slotActive)
	if err != nil {
		return fmt.Errorf("look for another benchmark: %w", err)
	}
	if others > 0 || slotActive {
		return fmt.Errorf("%w (%d connections, slot %s active %v): wait for it to finish", ErrBusy, others, b.cfg.Slot, slotActive)
	}
	return nil
}

func (b *bencher) pickStrategies(ctx context.Context) ([]Strategy, error) {
	var hasUUIDv7 bool
	if err := b.db.QueryRow(ctx, `SELECT to_regproc('pg_catalog.uuidv7') IS NOT NULL`).Scan(&hasUUIDv7); err != nil {
		return nil, fmt.Errorf("look for uuidv7(): %w", err)
	}
	names := b.cfg.Strategies
	explicit := len(names) > 0
	if !explicit {
		for _, s := range Strategies {
			names = append(names, s.Name)
		}
	}
	var out []Strategy
	for _, n := range names {
		s, err := strategyByName(n)
		if err != nil {
			return nil, err
		}
		if s.needsUUIDv7 && !hasUUIDv7 {
			reason := "the server has no uuidv7() (PostgreSQL 18 adds it); server is " + b.res.Settings.ServerVersion
			if explicit {
				return nil, fmt.Errorf("strategy %s: %s", s.Name, reason)
			}
			b.res.Skipped = append(b.res.Skipped, Skip{Strategy: s.Name, Reason: reason})
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

func (b *bencher) params(strategies []Strategy) Params {
	names := make([]string, len(strategies))
	for i, s := range strategies {
		names[i] = s.Name
	}
	p := Params{Strategies: names, Workloads: b.cfg.Workloads, Clients: b.cfg.Clients,
		DurationSeconds: b.cfg.Duration.Seconds(), SeedRows: b.cfg.SeedRows, Runs: b.cfg.Runs,
		BatchRows: b.cfg.BatchRows, Partitions: b.cfg.Partitions, PayloadBytes: b.cfg.PayloadBytes,
		KeySeed: b.cfg.KeySeed, SynchronousCommit: b.cfg.SynchronousCommit, WithCDC: b.cfg.WithCDC,
		CheckpointBefore: !b.cfg.NoCheckpoint, RightEdgeFraction: rightEdgeFraction, RightEdgeMinBlocks: rightEdgeMinBlocks, KeysPerMillisecond: b.cfg.KeysPerMillisecond,
		SyntheticClock: b.cfg.Clock == nil, TablePerRun: true, KeepDisturbed: b.cfg.KeepDisturbed, SelfCheck: b.cfg.SelfCheck}
	if b.cfg.WithCDC {
		p.CDCSink = "null"
		if b.cfg.ClickHouseURL != "" {
			p.CDCSink = "clickhouse"
		}
	}
	return p
}
