package kafka_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
)

// failWithin bounds how long a loader that must fail may take: a hang
// detector, not a speed test.
const failWithin = 60 * time.Second

// retryEnv is a table published into the test broker and a ClickHouse
// sink through a proxy, reached once (New pings the server).
type retryEnv struct {
	*env
	sink  *clickhouse.Sink
	proxy *testkit.Proxy
	logs  *observer.ObservedLogs // the loader's, Warn and above
}

func newRetryEnv(t *testing.T) *retryEnv {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`,
		`INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 3000) g`)
	e.publish(e.db+"_r", 2)
	u, err := url.Parse(e.chURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := testkit.StartProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u.Host = proxy.Addr()
	sink, err := clickhouse.New(context.Background(), clickhouse.Config{DSN: u.String(), Database: e.db + "_kafka"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return &retryEnv{env: e, sink: sink, proxy: proxy}
}

// start runs a loader of cfg (its Client set here) until it returns.
func (r *retryEnv) start(cfg kafka.LoadConfig) <-chan error {
	r.t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	r.logs = logs
	cfg.Client = r.client()
	cfg.Client.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(r.t, zaptest.Level(zap.WarnLevel)).Core(), core))
	cfg.Retryable = clickhouse.IsRetryable
	l, err := kafka.NewLoader(cfg, r.sink)
	if err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	r.t.Cleanup(cancel)
	go func() { done <- l.Run(ctx) }()
	return done
}

func (r *retryEnv) retries() int { return r.logs.FilterMessageSnippet("connection lost").Len() }

func wait(t *testing.T, done <-chan error, within time.Duration) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(within):
		t.Fatalf("the loader was still running after %s", within)
		return nil, 0
	}
}

// TestLoaderRetriesLostClickHouse: ClickHouse, reached at the start, goes
// away before the first write; the loader retries (it logs "connection
// lost") and, once ClickHouse is back, catches up: ClickHouse then holds
// what PostgreSQL holds.
func TestLoaderRetriesLostClickHouse(t *testing.T) {
	r := newRetryEnv(t)
	r.proxy.Refuse()
	done := r.start(kafka.LoadConfig{Group: "retry", CatchUp: true, MaxRows: 500, RetryFor: 2 * time.Minute})
	testkit.WaitFor(t, failWithin, "a retry logged", func() bool { return r.retries() >= 2 })
	if err := r.proxy.Listen(); err != nil {
		t.Fatal(err)
	}
	err, took := wait(t, done, 3*time.Minute)
	if err != nil {
		t.Fatalf("the loader failed after ClickHouse came back: %v", err)
	}
	t.Logf("caught up %s after ClickHouse came back, after %d retries", took.Round(time.Millisecond), r.retries())
	r.verifyAll(r.sink)
}

// TestLoaderGivesUpOnClickHouse: ClickHouse stays away; the loader retries
// for --retry-for and then fails, naming the flag and ClickHouse's error.
// A catch-up loader must end: a script waits for it.
func TestLoaderGivesUpOnClickHouse(t *testing.T) {
	r := newRetryEnv(t)
	r.proxy.Refuse()
	start := time.Now()
	done := r.start(kafka.LoadConfig{Group: "giveup", CatchUp: true, RetryFor: 4 * time.Second})
	err, _ := wait(t, done, failWithin)
	took := time.Since(start)
	t.Logf("failed after %s: %v", took.Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "gave up after retrying for") || !strings.Contains(err.Error(), "--retry-for") ||
		!strings.Contains(err.Error(), r.proxy.Addr()) {
		t.Errorf("error %v, want one that gives up, names --retry-for and the ClickHouse address %s", err, r.proxy.Addr())
	}
	if took < 4*time.Second || r.retries() < 2 {
		t.Errorf("gave up after %s and %d retries, want at least --retry-for's 4s and 2 retries", took.Round(time.Millisecond), r.retries())
	}
}

// TestLoaderGivesUpOnLostKafka: the brokers answer, the loader loads
// everything, then the brokers go away; the loader (not catching up, so
// it would run for ever) retries for --retry-for and then fails naming
// the brokers.
func TestLoaderGivesUpOnLostKafka(t *testing.T) {
	r := newRetryEnv(t)
	tm := r.tables(r.sink)[0]
	stored := r.storedRows(t, r.db+"_kafka", tm.Name)
	done := r.start(kafka.LoadConfig{Group: "lost", RetryFor: 4 * time.Second, Rescan: 500 * time.Millisecond})
	testkit.WaitFor(t, failWithin, "the rows loaded", func() bool { return stored() == 3000 })
	r.cluster.Close()
	lost := time.Now()
	err, _ := wait(t, done, failWithin)
	took := time.Since(lost)
	t.Logf("failed %s after the brokers went: %v", took.Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "gave up after retrying for") || !strings.Contains(err.Error(), "cannot reach the Kafka brokers "+r.brokers[0]) {
		t.Errorf("error %v, want one that gives up and names the brokers", err)
	}
	if took < 4*time.Second || r.retries() < 2 {
		t.Errorf("gave up after %s and %d retries, want at least --retry-for's 4s and 2 retries", took.Round(time.Millisecond), r.retries())
	}
}

// TestLoaderCatchUpStallEnds: another member of the group holds one of
// the two partitions and never commits it, so a catch-up can never end;
// the loader gives up after --retry-for (one stalled session, 30 s, here)
// with an error that says where to look, instead of rejoining for ever.
func TestLoaderCatchUpStallEnds(t *testing.T) {
	r := newRetryEnv(t)
	holder := kafkago.NewReader(kafkago.ReaderConfig{Brokers: r.brokers, GroupID: "stall", GroupTopics: []string{"it.public.items"},
		StartOffset: kafkago.FirstOffset, HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second})
	defer holder.Close()
	ctx, cancel := context.WithTimeout(context.Background(), failWithin)
	defer cancel()
	if _, err := holder.FetchMessage(ctx); err != nil { // a member now, with both partitions
		t.Fatal(err)
	}
	start := time.Now()
	done := r.start(kafka.LoadConfig{Group: "stall", CatchUp: true, RetryFor: time.Second})
	err, _ := wait(t, done, 2*failWithin)
	t.Logf("failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "read nothing for") || !strings.Contains(err.Error(), "--retry-for") ||
		!strings.Contains(err.Error(), "advertised.listeners") {
		t.Errorf("error %v, want one that says the catch-up stalled, names --retry-for and what to check", err)
	}
}

// TestPublisherStopsOnRefusal gives the publisher a slot of another
// database, which the replicator refuses: the run ends with the refusal,
// which names the way out, instead of retrying it as a lost connection
// (kafka.IsRetryable judges every error of the run, and once took any it
// did not know for a broker's).
func TestPublisherStopsOnRefusal(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text)`, `INSERT INTO items VALUES (1, 'a')`)
	slot := e.db + "_elsewhere"
	admin, err := pgx.Connect(context.Background(), os.Getenv("FERRY_PG_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := admin.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			t.Error(err)
		}
	}()
	s, err := kafka.New(kafka.Config{Client: e.client(), Database: e.db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := replicator.New(e.config(slot), s, s, s.Capabilities(), kafka.IsRetryable)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), failWithin)
	defer cancel()
	err = r.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("the publisher retried a slot of another database until its deadline (%s); returned %v", failWithin, err)
	}
	if err == nil || !strings.Contains(err.Error(), "choose another --slot") {
		t.Fatalf("the publisher's error does not name the way out: %v", err)
	}
	if kafka.IsRetryable(err) {
		t.Errorf("kafka.IsRetryable takes the replicator's refusal for a broker's error: %v", err)
	}
}
