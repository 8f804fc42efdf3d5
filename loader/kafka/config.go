package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/internal/netdial"
)

// Client says which brokers to talk to and how. The zero value of every
// field but Brokers means its default.
type Client struct {
	// Brokers are host:port addresses of the cluster. Required.
	Brokers []string
	// TopicPrefix starts every topic's name. Default "ferry".
	TopicPrefix string
	// TLS, when set, encrypts the connections. Default: plain TCP.
	TLS *tls.Config
	// SASL, when set, authenticates the connections (plain or SCRAM, from
	// kafka-go's sasl packages). Default: none.
	SASL sasl.Mechanism
	// Logger receives messages, with component=kafka. Default zap.NewNop().
	Logger *zap.Logger
}

func (c Client) withDefaults() (Client, error) {
	if len(c.Brokers) == 0 {
		return c, errors.New("kafka: no brokers given: set --kafka-brokers or FERRY_KAFKA_BROKERS (host:port,...)")
	}
	if c.TopicPrefix == "" {
		c.TopicPrefix = "ferry"
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Logger = c.Logger.With(zap.String("component", "kafka"))
	return c, nil
}

func (c Client) transport() *kafkago.Transport {
	return &kafkago.Transport{TLS: c.TLS, SASL: c.SASL, DialTimeout: 10 * time.Second, Dial: c.dial}
}

// brokerDialer dials brokers through package netdial, so that a broker
// that vanished is noticed in about a minute; TLS and SASL come after,
// from kafka-go.
func brokerDialer() *net.Dialer { return netdial.Dialer(10*time.Second, netdial.UserTimeout) }

func (c Client) dialer() *kafkago.Dialer {
	return &kafkago.Dialer{TLS: c.TLS, SASLMechanism: c.SASL, Timeout: 10 * time.Second, DialFunc: c.dial}
}

// admin returns a client with a transport of its own; closeClient ends it.
func (c Client) admin() *kafkago.Client {
	return &kafkago.Client{Addr: kafkago.TCP(c.Brokers...), Transport: c.transport(), Timeout: 30 * time.Second}
}

// closeClient closes a client's transport: its connections, and the
// goroutine that refreshes its metadata every few seconds, which would
// otherwise dial the brokers for as long as the process lives.
func closeClient(a *kafkago.Client) {
	if t, ok := a.Transport.(*kafkago.Transport); ok {
		t.CloseIdleConnections()
	}
}

// Ping asks the brokers for the cluster's metadata, so that a wrong
// address fails at start, not at the first write.
func (c Client) Ping(ctx context.Context) error {
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	a := c.admin()
	defer closeClient(a)
	if _, err := a.Metadata(ctx, &kafkago.MetadataRequest{}); err != nil {
		return c.explainUnreachable(fromBrokers(fmt.Errorf("kafka: ask %v for metadata: %w", c.Brokers, err)))
	}
	return nil
}

// explainUnreachable puts the likely fixes in front of an error of no
// broker answering; other errors it returns as they are.
func (c Client) explainUnreachable(err error) error {
	var ne net.Error
	if !errors.As(err, &ne) && !errors.Is(err, syscall.ECONNREFUSED) {
		return err
	}
	return fmt.Errorf("cannot reach the Kafka brokers %s: check --kafka-brokers (FERRY_KAFKA_BROKERS), "+
		"that the brokers run and listen there (listeners, advertised.listeners), and that no firewall is in the way: %w",
		strings.Join(c.Brokers, ","), err)
}

// StateTopic is the compacted topic where the publisher keeps the slot's
// snapshot and table states (loader.SnapshotStore, loader.TableStateStore).
func (c Client) StateTopic() string { return c.TopicPrefix + ".ferry-state" }

// SchemaTopic carries the table descriptions change messages refer to.
func (c Client) SchemaTopic() string { return c.TopicPrefix + ".schema-changes" }

// TableTopic is the topic of a PostgreSQL table: <prefix>.<schema>.<table>.
// Kafka allows only ASCII letters, digits, '.', '_' and '-' in a topic
// name, so any other byte becomes '_'.
func TableTopic(prefix, schemaName, table string) string {
	return prefix + "." + topicPart(schemaName) + "." + topicPart(table)
}

func topicPart(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

// IsRetryable tells a transient error (a broker away, a timeout, a
// rebalance) from one retrying cannot fix: a value the envelope cannot
// carry, or a schema change the transport cannot apply. Following ferry's
// rule, unknown errors of the talk with the brokers are retried; an error
// that did not come from it is not the publisher's to judge: the
// replicator passes every error of its run here, and its own refusals (a
// slot of another database, a table it cannot replicate) must end the run
// with their message, as they do with the ClickHouse sink, instead of
// being retried for ever as a lost connection.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, errEncoding) || errors.Is(err, errRebuild) || errors.Is(err, errRowTooLarge) {
		return false
	}
	var ke kafkago.Error
	if errors.As(err, &ke) {
		return ke.Temporary() || ke.Timeout()
	}
	var be *brokerError
	return errors.As(err, &be)
}

// brokerError marks an error of a request to the brokers (see IsRetryable).
type brokerError struct{ err error }

func (e *brokerError) Error() string { return e.err.Error() }
func (e *brokerError) Unwrap() error { return e.err }

// fromBrokers marks err, when not nil, as the answer (or the silence) of
// the brokers to a request.
func fromBrokers(err error) error {
	if err == nil {
		return nil
	}
	return &brokerError{err}
}
