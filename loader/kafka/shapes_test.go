package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/schema"
)

// TestKafkaTableShapes: ferry load makes the ClickHouse table in the shape
// its configuration gives, and the table then holds PostgreSQL's rows
// through key changes that move rows across partitions, and deletes.
func TestKafkaTableShapes(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE orders (tenant int, id bigint, v text, PRIMARY KEY (tenant, id))`,
		`INSERT INTO orders SELECT g % 7, g, 'v' || g FROM generate_series(1, 200) g`)
	e.publish("kafka_slot", 2)
	dest := e.chSink("_kafka")
	shapes := map[string]schema.Shape{"public.orders": {OrderBy: []string{"id", "tenant"}, PartitionBy: "tenant % 4",
		Settings: map[string]string{"index_granularity": "512"}}}
	load := func() {
		t.Helper()
		l, err := kafka.NewLoader(kafka.LoadConfig{Client: e.client(), Group: "shapes", CatchUp: true, Shapes: shapes}, dest)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := l.Run(ctx); err != nil {
			t.Fatalf("load: %v", err)
		}
	}
	load()
	e.exec(`UPDATE orders SET tenant = tenant + 1, v = 'moved' WHERE id % 5 = 0`,
		`UPDATE orders SET v = v || '!' WHERE id % 3 = 0`, `DELETE FROM orders WHERE id % 11 = 0`)
	e.publish("kafka_slot", 2)
	load()
	e.verifyAll(dest)

	opts, err := ch.ParseDSN(e.chURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var full, sorting string
	if err := conn.QueryRow(context.Background(), "SELECT engine_full, sorting_key FROM system.tables WHERE database = ? AND name = 'orders'",
		e.db+"_kafka").Scan(&full, &sorting); err != nil {
		t.Fatal(err)
	}
	if sorting != "id, tenant" || !strings.Contains(full, "PARTITION BY") || !strings.Contains(full, "index_granularity = 512") {
		t.Errorf("the loader made engine_full %q, sorting_key %q: not the shape asked for", full, sorting)
	}
}
