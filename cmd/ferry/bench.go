package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/bench"
)

type benchCmd struct {
	PG            string        `name:"pg" help:"PostgreSQL connection URL." env:"FERRY_PG_URL" required:""`
	CH            string        `name:"ch" help:"ClickHouse URL; with --with-cdc the replicator writes there (else to a null sink)." env:"FERRY_CH_URL"`
	CDCSink       string        `name:"cdc-sink" help:"Where --with-cdc writes: clickhouse (needs --ch) or null." enum:"clickhouse,null," default:""`
	Strategies    []string      `help:"Strategies (default all the server supports): bigserial, identity, uuidv4, uuidv7, uuidv7-mono, hash8, fillfactor70, snowflake, uuidv7-native."`
	Workloads     []string      `help:"Workloads (default all): insert, insert-batch, update-spread, update-hot."`
	Clients       int           `help:"Concurrent clients." default:"40"`
	Sweep         string        `help:"Sweep a parameter instead, e.g. clients=1,10,25,50,100,200."`
	Duration      time.Duration `help:"Length of each timed run." default:"20s"`
	SeedRows      int           `name:"seed-rows" help:"Rows in each table before the first run." default:"3000000"`
	Runs          int           `help:"Runs of each combination; the report shows the median and the spread." default:"3"`
	BatchRows     int           `name:"batch-rows" help:"Rows per transaction of insert-batch." default:"100"`
	Partitions    int           `help:"Partitions of hash8." default:"8"`
	Payload       int           `help:"Width in bytes of an extra text column (0: none)." default:"0"`
	KeySeed       uint64        `name:"key-seed" help:"Seed of the client-side key generators (recorded in the results)." default:"20261201"`
	SyncCommit    string        `name:"synchronous-commit" help:"synchronous_commit of the load connections." default:"off"`
	WithCDC       bool          `name:"with-cdc" help:"Run ferry's replicator on the same WAL and measure its lag."`
	Quick         bool          `help:"Every strategy and workload at small sizes (a minute or two), for tests and a first look."`
	Keep          bool          `help:"Keep the ferry_bench schema and its tables."`
	Out           string        `help:"Output directory. Default bench/results/<timestamp>."`
	WALDump       string        `name:"pg-waldump" help:"pg_waldump of the server's major version, to count each run's WAL (default: pg_config --bindir, then PATH)." env:"FERRY_PG_WALDUMP"`
	WALSource     string        `name:"wal-source" help:"Where WAL figures come from: pg_waldump (fail if it cannot read the server's WAL), pg_stat_wal (approximate), or empty for pg_waldump when possible." enum:"pg_waldump,pg_stat_wal," default:""`
	SelfCheck     bool          `name:"self-check" help:"Read every run's WAL again with pg_waldump --stats and --fullpage; fail the run on a difference above 1%."`
	KeepDisturbed bool          `name:"keep-disturbed" help:"Keep, marked, runs with a checkpoint, autovacuum or other databases' WAL in their window (default: discard them)."`
	KeysPerMs     int           `name:"keys-per-ms" help:"Rate of the synthetic clock of time-ordered keys: 1 ms per this many keys of a run." default:"20"`
}

func (c *benchCmd) Run(ctx context.Context, log *zap.Logger) error {
	cfg, err := c.config(log)
	if err != nil {
		return err
	}
	out := c.Out
	if out == "" {
		out = filepath.Join("bench", "results", time.Now().UTC().Format("20060102T150405Z"))
	}
	bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetWidth(24),
		progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true), progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish())
	cfg.Progress = func(done, total int, what string) {
		bar.ChangeMax(total)
		bar.Describe(what)
		bar.Set(done) //nolint:errcheck // a progress line that fails to draw is not worth stopping for
	}
	res, err := bench.Run(ctx, cfg)
	bar.Finish() //nolint:errcheck // as above
	if res != nil && len(res.Runs) > 0 {
		if werr := bench.Write(out, res); werr != nil {
			return werr
		}
		fmt.Fprintln(os.Stderr, "results in", out)
	}
	if err != nil {
		return err
	}
	for _, e := range res.Runs {
		if !e.Sanity.Passed {
			return fmt.Errorf("%s %s clients=%d: no run passed its sanity checks (see report.md)", e.Strategy, e.Workload, e.Clients)
		}
	}
	return nil
}

func (c *benchCmd) config(log *zap.Logger) (bench.Config, error) {
	cfg := bench.Config{ConnString: c.PG, Strategies: splitList(c.Strategies), Workloads: splitList(c.Workloads),
		Clients: []int{c.Clients}, Duration: c.Duration, SeedRows: c.SeedRows, Runs: c.Runs, BatchRows: c.BatchRows,
		Partitions: c.Partitions, PayloadBytes: c.Payload, KeySeed: c.KeySeed, SynchronousCommit: c.SyncCommit,
		WithCDC: c.WithCDC, Keep: c.Keep, Logger: log, WALDump: c.WALDump, WALSource: c.WALSource, SelfCheck: c.SelfCheck,
		KeepDisturbed: c.KeepDisturbed, KeysPerMillisecond: c.KeysPerMs}
	if cfg.WALDump == "" {
		cfg.WALDump = findWALDump()
	}
	if c.Quick {
		cfg = cfg.Quick()
	}
	if c.Sweep != "" {
		clients, err := parseSweep(c.Sweep)
		if err != nil {
			return cfg, err
		}
		cfg.Clients = clients
	}
	if c.WithCDC && c.CDCSink != "null" {
		if c.CDCSink == "clickhouse" && c.CH == "" {
			return cfg, fmt.Errorf("--cdc-sink clickhouse needs --ch or FERRY_CH_URL")
		}
		cfg.ClickHouseURL = c.CH
	}
	return cfg, nil
}

// findWALDump looks for pg_waldump where pg_config says the binaries are,
// then on the PATH; "" when there is none.
func findWALDump() string {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "pg_waldump")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("pg_waldump"); err == nil {
		return p
	}
	return ""
}

// splitList accepts both repeated flags and comma lists.
func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// parseSweep reads "clients=1,10,25"; clients is the one parameter swept.
func parseSweep(s string) ([]int, error) {
	name, list, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) != "clients" {
		return nil, fmt.Errorf("--sweep %q: only clients=N,N,... can be swept", s)
	}
	var out []int
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--sweep %q: %q is not a client count", s, p)
		}
		out = append(out, n)
	}
	return out, nil
}
