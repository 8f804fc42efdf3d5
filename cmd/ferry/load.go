package main

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/loader/kafka"
)

// loadCmd is ferry load --from-kafka: a member of a consumer group that
// writes what ferry run --sink kafka publishes into ClickHouse.
type loadCmd struct {
	FromKafka  bool   `name:"from-kafka" help:"Consume the Kafka topics of --topic-prefix (the only source for now)." required:""`
	CH         string `name:"ch" help:"ClickHouse native-protocol URL, e.g. clickhouse://default@127.0.0.1:9000." env:"FERRY_CH_URL" required:""`
	CHDatabase string `name:"ch-database" help:"ClickHouse database (created when missing); the direct path's default is the PostgreSQL database's name." env:"FERRY_CH_DATABASE" required:""`
	chSecretFlags
	kafkaFlags
	Group         string        `help:"Consumer group; loaders of one group share the partitions." default:"ferry-loader" env:"FERRY_KAFKA_GROUP"`
	CatchUp       bool          `name:"catch-up" help:"Exit 0 once everything on the topics at the start is in ClickHouse."`
	RetryFor      time.Duration `name:"retry-for" help:"Give up once lost connections (Kafka, ClickHouse) have been retried this long (Kafka and ClickHouse not reached since the start are not retried). 0: for ever; with --catch-up 5m." default:"0s" env:"FERRY_RETRY_FOR"`
	CHFsync       bool          `name:"ch-fsync" help:"Make ClickHouse fsync every inserted part before the INSERT returns (fsync_after_insert, fsync_part_directory on ferry's tables), so a crash of the ClickHouse host cannot lose rows whose WAL ferry confirmed. Costs insert latency." env:"FERRY_CH_FSYNC"`
	CurrentViews  bool          `name:"current-views" help:"Create, for each replicated ClickHouse table <t>, a view <t>_current of its live rows with the source columns only (FINAL, deleted rows left out; all rows of an append-only table), kept in step with schema changes." env:"FERRY_CURRENT_VIEWS"`
	BatchRows     int           `name:"batch-rows" help:"Write when this many rows are pending." default:"50000" env:"FERRY_BATCH_ROWS"`
	BatchBytes    int           `name:"batch-bytes" help:"Write when the pending messages hold this many bytes." default:"33554432" env:"FERRY_BATCH_BYTES"`
	BatchAge      time.Duration `name:"batch-age" help:"Write when the oldest pending row waited this long." default:"300ms" env:"FERRY_BATCH_AGE"`
	FetchMaxBytes int           `name:"kafka-fetch-max-bytes" help:"Most bytes one fetch asks the brokers for; at least ferry run's --kafka-max-message-bytes." default:"16777216" env:"FERRY_KAFKA_FETCH_MAX_BYTES"`
	MetricsAddr   string        `name:"metrics-addr" help:"Serve /metrics (process metrics), /healthz and /readyz here (beside ferry run's 9187); empty disables." default:"127.0.0.1:9188" env:"FERRY_LOAD_METRICS_ADDR"`
	TableShapes   tableShapes   `name:"table-shapes" help:"The layout of ClickHouse tables the loader makes, by schema.table, as for ferry run: order_by, partition_by, ttl, settings, codecs." placeholder:"YAML" env:"FERRY_TABLE_SHAPES"`
}

func (c *loadCmd) Run(ctx context.Context, log *zap.Logger) error {
	if !c.FromKafka {
		return errors.New("ferry load needs --from-kafka")
	}
	client, err := c.client(log)
	if err != nil {
		return err
	}
	sink, err := clickhouse.New(ctx, clickhouse.Config{DSN: c.CH, Database: c.CHDatabase, Logger: log,
		CAFile: c.CHCAFile, Password: c.chPassword, Fsync: c.CHFsync, CurrentViews: c.CurrentViews,
		SharedTables: true})
	if err != nil {
		return err
	}
	defer sink.Close()
	l, err := kafka.NewLoader(kafka.LoadConfig{Client: client, Group: c.Group, CatchUp: c.CatchUp,
		RetryFor: c.RetryFor, Retryable: clickhouse.IsRetryable,
		MaxRows: c.BatchRows, MaxBytes: c.BatchBytes, MaxAge: c.BatchAge, FetchMaxBytes: c.FetchMaxBytes,
		Shapes: c.TableShapes}, sink)
	if err != nil {
		return err
	}
	if c.MetricsAddr == "" {
		return l.Run(ctx)
	}
	// The loader has no replication stream: it is ready once it runs.
	obs := newObserver(nil)
	obs.streaming = true
	g, gctx := errgroup.WithContext(ctx)
	aux, stop := context.WithCancel(gctx)
	g.Go(func() error { defer stop(); return l.Run(gctx) })
	g.Go(func() error { return serveMetrics(aux, c.MetricsAddr, obs, log, nil) })
	return g.Wait()
}
