// Command ferry keeps an analytical copy of PostgreSQL tables in ClickHouse.
// Flags, environment variables and (later) the config file are read here
// and nowhere else; the packages take structs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type cli struct {
	LogLevel  string          `help:"Log level: debug, info, warn, error." default:"info" env:"FERRY_LOG_LEVEL"`
	LogFormat string          `help:"Log format: console or json." default:"console" enum:"console,json" env:"FERRY_LOG_FORMAT"`
	Config    kong.ConfigFlag `help:"YAML file of flag values (keys as the flags' names); flags and env vars override it." type:"existingfile" placeholder:"FILE"`

	Run      runCmd      `cmd:"" help:"Copy the tables, then stream every change into ClickHouse."`
	Load     loadCmd     `cmd:"" help:"Load the change events ferry run --sink kafka publishes into ClickHouse (a consumer group)."`
	Verify   verifyCmd   `cmd:"" help:"Compare every replicated table in PostgreSQL and ClickHouse."`
	Setup    setupCmd    `cmd:"" help:"Install ferry's DDL capture (an event trigger; needs a superuser), so schema changes reach ClickHouse in stream order."`
	Status   statusCmd   `cmd:"" help:"Show the slot, lag, retained WAL, tables and last error (works while ferry run runs elsewhere)."`
	Resync   resyncCmd   `cmd:"" help:"Copy tables afresh while ferry run streams the others: a shadow table, swapped in."`
	Check    checkCmd    `cmd:"" help:"Check PostgreSQL and ClickHouse for everything ferry run needs; list each problem with its fix."`
	Teardown teardownCmd `cmd:"" help:"Drop ferry's slot, publications and DDL trigger (and with --drop-clickhouse its ClickHouse tables)."`
	Cfg      configCmd   `cmd:"" name:"config" help:"Show the effective configuration."`
	Demo     demoCmd     `cmd:"" help:"Create an example schema with a stream of writes, replicate it and show both sides (local stack)."`
	Bench    benchCmd    `cmd:"" help:"Benchmark primary-key strategies: throughput, WAL, page contention and replication lag (schema ferry_bench)."`
	Version  versionCmd  `cmd:"" help:"Print ferry's version."`
}

type versionCmd struct{}

func (versionCmd) Run() error {
	fmt.Println("ferry", version)
	return nil
}

func main() {
	var c cli
	kctx := kong.Parse(&c, kongOptions()...)
	log, err := newLogger(c.LogLevel, c.LogFormat)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferry:", err)
		os.Exit(2)
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed sync of stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kctx.BindTo(ctx, (*context.Context)(nil))
	kctx.Bind(log)
	kctx.Bind(kctx)
	go exitIfStuck(ctx, log)
	stopProfile := startProfile()
	if err := kctx.Run(); err != nil {
		stopProfile()
		log.Error("ferry stopped", zap.Error(err))
		fmt.Fprintln(os.Stderr, "ferry:", err)
		os.Exit(1)
	}
	stopProfile()
}

// kongOptions configure the command line parser; tests use them too.
func kongOptions() []kong.Option {
	return []kong.Option{
		kong.Name("ferry"),
		kong.Description("ferry replicates PostgreSQL into ClickHouse ReplacingMergeTree tables through logical replication."),
		kong.UsageOnError(),
		kong.Configuration(loadYAML),
	}
}

func newLogger(level, format string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Encoding = format
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	if format == "console" {
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
	}
	cfg.DisableStacktrace = true
	return cfg.Build()
}

// shutdownLimit bounds how long ferry takes to stop after SIGTERM; the
// stream's own final flush gives up after 30 s.
const shutdownLimit = 40 * time.Second

// exitIfStuck ends the process if it has not stopped shutdownLimit after
// ctx is done (a signal), so a hung connection cannot keep it alive.
func exitIfStuck(ctx context.Context, log *zap.Logger) {
	<-ctx.Done()
	time.Sleep(shutdownLimit)
	log.Error("did not stop in time after the signal; exiting", zap.Duration("limit", shutdownLimit))
	os.Exit(1)
}
