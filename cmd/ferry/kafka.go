package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
)

// kafkaFlags say how to reach the Kafka cluster; ferry run --sink kafka
// and ferry load --from-kafka share them.
type kafkaFlags struct {
	KafkaBrokers  []string `name:"kafka-brokers" help:"Kafka brokers (host:port,...)." env:"FERRY_KAFKA_BROKERS"`
	TopicPrefix   string   `name:"topic-prefix" help:"Topics are <prefix>.<schema>.<table>, <prefix>.schema-changes and <prefix>.ferry-state." default:"ferry" env:"FERRY_TOPIC_PREFIX"`
	KafkaTLS      bool     `name:"kafka-tls" help:"Connect to the brokers with TLS." env:"FERRY_KAFKA_TLS"`
	KafkaCA       string   `name:"kafka-ca" help:"PEM file of the CA that signed the brokers' certificates (default: the system's)." type:"existingfile" env:"FERRY_KAFKA_CA"`
	SASLMechanism string   `name:"kafka-sasl" help:"SASL mechanism: none, plain, scram-sha-256 or scram-sha-512." default:"none" enum:"none,plain,scram-sha-256,scram-sha-512" env:"FERRY_KAFKA_SASL"`
	SASLUser      string   `name:"kafka-user" help:"SASL user name." env:"FERRY_KAFKA_USER"`
	SASLPassword  string   `name:"kafka-password" help:"SASL password." env:"FERRY_KAFKA_PASSWORD"`
}

// kafkaPublishFlags are ferry run's settings for --sink kafka.
type kafkaPublishFlags struct {
	kafkaFlags
	Partitions        int    `name:"kafka-partitions" help:"Partitions of the table topics ferry creates." default:"1" env:"FERRY_KAFKA_PARTITIONS"`
	ReplicationFactor int    `name:"kafka-replication-factor" help:"Replication factor of the topics ferry creates (use 3 in production)." default:"1" env:"FERRY_KAFKA_REPLICATION_FACTOR"`
	MaxMessageBytes   int64  `name:"kafka-max-message-bytes" help:"Largest record batch the publisher sends, so the largest row event it can publish; the table topics ferry creates get max.message.bytes = this + 64 KiB when above the default (raise existing topics or the brokers' message.max.bytes yourself, and ferry load --kafka-fetch-max-bytes)." default:"983040" env:"FERRY_KAFKA_MAX_MESSAGE_BYTES"`
	Tombstones        bool   `name:"kafka-tombstones" help:"Follow every delete with a tombstone (the key, a null value) so log compaction can forget the row; --no-kafka-tombstones to omit them." default:"true" negatable:"" env:"FERRY_KAFKA_TOMBSTONES"`
	TruncateEvents    bool   `name:"kafka-truncate-events" help:"Publish a TRUNCATE as Debezium's op 't' event (Debezium skips them by default). Without it a truncation is a control record (null value, ferry.truncate header) that ferry load applies and Debezium's consumers skip." env:"FERRY_KAFKA_TRUNCATE_EVENTS"`
	Schemas           bool   `name:"kafka-schemas" help:"Write keys and values in Kafka Connect's JSON form with schemas (schema + payload, Debezium's schema names), for JsonConverter with schemas.enable=true." env:"FERRY_KAFKA_SCHEMAS"`
	DecimalMode       string `name:"kafka-decimal-mode" help:"Debezium's decimal.handling.mode for numeric values: precise (Connect Decimal, base64 bytes), string or double (lossy)." default:"precise" enum:"precise,string,double" env:"FERRY_KAFKA_DECIMAL_MODE"`
	TimeMode          string `name:"kafka-time-mode" help:"Debezium's time.precision.mode: adaptive (days, micro- or milliseconds by precision), connect (Connect's millisecond types, lossy below a millisecond) or isostring." default:"adaptive" enum:"adaptive,connect,isostring" env:"FERRY_KAFKA_TIME_MODE"`
}

func (f kafkaFlags) client(log *zap.Logger) (kafka.Client, error) {
	c := kafka.Client{Brokers: f.KafkaBrokers, TopicPrefix: f.TopicPrefix, Logger: log}
	if f.KafkaTLS || f.KafkaCA != "" {
		c.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if f.KafkaCA != "" {
			pem, err := os.ReadFile(f.KafkaCA)
			if err != nil {
				return c, fmt.Errorf("--kafka-ca: %w", err)
			}
			c.TLS.RootCAs = x509.NewCertPool()
			if !c.TLS.RootCAs.AppendCertsFromPEM(pem) {
				return c, fmt.Errorf("--kafka-ca %s: no PEM certificate in it", f.KafkaCA)
			}
		}
	}
	var err error
	c.SASL, err = f.sasl()
	return c, err
}

func (f kafkaFlags) sasl() (sasl.Mechanism, error) {
	switch f.SASLMechanism {
	case "plain":
		return plain.Mechanism{Username: f.SASLUser, Password: f.SASLPassword}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, f.SASLUser, f.SASLPassword)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, f.SASLUser, f.SASLPassword)
	}
	return nil, nil
}

// runKafka is ferry run --sink kafka: the replicator publishes into Kafka,
// keeping its snapshot and table states on the state topic, so it needs no
// ClickHouse.
func (c *runCmd) runKafka(ctx context.Context, log *zap.Logger) error {
	client, err := c.client(log)
	if err != nil {
		return err
	}
	if err := client.Ping(ctx); err != nil {
		return err
	}
	pg, err := pgconn.ParseConfig(c.PG)
	if err != nil {
		return fmt.Errorf("--pg: %s: %w", replicator.Redact(c.PG), err)
	}
	sink, err := kafka.New(kafka.Config{Client: client, Database: pg.Database,
		Partitions: c.Partitions, ReplicationFactor: c.ReplicationFactor, OmitTombstones: !c.Tombstones,
		BatchBytes: c.MaxMessageBytes, Format: kafka.Format{TruncateEvents: c.TruncateEvents, Schemas: c.Schemas,
			DecimalMode: c.DecimalMode, TimeMode: c.TimeMode, Version: "ferry-" + version}})
	if err != nil {
		return err
	}
	defer sink.Close()
	obs := newObserver(newCopyProgress(log))
	rep, err := replicator.New(c.replicatorConfig(log, obs), sink, sink, sink.Capabilities(), kafka.IsRetryable)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	aux, stopAux := context.WithCancel(gctx)
	defer stopAux()
	g.Go(func() error {
		defer stopAux()
		return rep.Run(gctx)
	})
	if c.MetricsAddr != "" {
		g.Go(func() error { return serveMetrics(aux, c.MetricsAddr, obs, log, newStatusPage(obs, c)) })
	}
	return g.Wait()
}
