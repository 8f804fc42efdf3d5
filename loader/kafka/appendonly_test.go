package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
	"github.com/ferry-cdc/ferry/verify"
)

// TestKafkaAppendOnlyCopy sends a COPY into an append-only table through
// Kafka: the rows of one heap page share a WAL position, and their numbers
// among it (HeaderSeq) must reach ClickHouse, or they collapse into one.
func TestKafkaAppendOnlyCopy(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE ev (n int, v text)`, `INSERT INTO ev VALUES (0, 'seed')`)
	cfg := e.config("kafka_slot")
	cfg.AppendOnly = []string{"public.ev"}
	e.publishConfig(cfg, 3)
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "%d\tcopied %d\n", i%100, i%100)
	}
	if _, err := e.pg.PgConn().CopyFrom(context.Background(), strings.NewReader(b.String()), "COPY ev (n, v) FROM STDIN"); err != nil {
		t.Fatal(err)
	}
	e.publishConfig(cfg, 3)
	viaKafka := e.chSink("_kafka")
	if err := e.load(viaKafka, "it-loader", 0); err != nil {
		t.Fatalf("load: %v", err)
	}
	tms, err := replicator.Tables(context.Background(), cfg, viaKafka.Capabilities())
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range tms {
		res, err := verify.Table(context.Background(), tm, func(ctx context.Context, tm *schema.TableMap, fn func([]any) error) error {
			return replicator.ScanTable(ctx, e.pgURL, tm, fn)
		}, viaKafka.ScanLiveColumns, verify.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Match || res.SourceRows != 20001 {
			t.Errorf("%s: %d rows in PostgreSQL (want 20001), %d in ClickHouse: %v", res.Table, res.SourceRows, res.DestRows, res.Differences)
		}
	}
}

// publishConfig runs the replicator with cfg into Kafka until it has caught up.
func (e *env) publishConfig(cfg replicator.Config, partitions int) {
	e.t.Helper()
	s, err := kafka.New(kafka.Config{Client: e.client(), Database: e.db, Partitions: partitions})
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close()
	r, err := replicator.New(cfg, s, s, s.Capabilities(), kafka.IsRetryable)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
}
