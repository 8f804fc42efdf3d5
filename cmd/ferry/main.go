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

	"github.com/alecthomas/kong"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type cli struct {
	LogLevel  string `help:"Log level: debug, info, warn, error." default:"info" env:"FERRY_LOG_LEVEL"`
	LogFormat string `help:"Log format: console or json." default:"console" enum:"console,json" env:"FERRY_LOG_FORMAT"`

	Run     runCmd     `cmd:"" help:"Copy the tables, then stream every change into ClickHouse."`
	Verify  verifyCmd  `cmd:"" help:"Compare every replicated table in PostgreSQL and ClickHouse."`
	Demo    demoCmd    `cmd:"" help:"Create an example schema with a stream of writes, replicate it and show both sides (local stack)."`
	Version versionCmd `cmd:"" help:"Print ferry's version."`
}

type versionCmd struct{}

func (versionCmd) Run() error {
	fmt.Println("ferry", version)
	return nil
}

func main() {
	var c cli
	kctx := kong.Parse(&c,
		kong.Name("ferry"),
		kong.Description("ferry replicates PostgreSQL into ClickHouse ReplacingMergeTree tables through logical replication."),
		kong.UsageOnError(),
	)
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
	if err := kctx.Run(); err != nil {
		log.Error("ferry stopped", zap.Error(err))
		fmt.Fprintln(os.Stderr, "ferry:", err)
		os.Exit(1)
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
