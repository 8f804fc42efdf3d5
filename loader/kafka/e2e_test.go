package kafka_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
	"github.com/ferry-cdc/ferry/schema"
	"github.com/ferry-cdc/ferry/verify"
)

// env is one test's PostgreSQL database, its ClickHouse databases and an
// in-process TEST broker (kfake).
type env struct {
	t       *testing.T
	db      string
	pgURL   string
	chURL   string
	pg      *pgx.Conn
	brokers []string
	cluster *kfake.Cluster
	// textCols is replicator.Config.TextColumns for both paths.
	textCols []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base, chURL := os.Getenv("FERRY_PG_URL"), os.Getenv("FERRY_CH_URL")
	if base == "" || chURL == "" {
		t.Skip("FERRY_PG_URL and FERRY_CH_URL are not set: run `make stack-up` and `. .stack/env` (make test does both)")
	}
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	e := &env{t: t, db: "ferry_kt_" + hex.EncodeToString(b), chURL: chURL}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+e.db); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	u.Path = "/" + e.db
	e.pgURL = u.String()
	if e.pg, err = pgx.Connect(ctx, e.pgURL); err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	e.brokers, e.cluster = cluster.ListenAddrs(), cluster
	t.Cleanup(func() {
		cluster.Close()
		e.cleanup(base)
	})
	return e
}

func (e *env) cleanup(base string) {
	ctx := context.Background()
	e.pg.Close(ctx)
	if admin, err := pgx.Connect(ctx, base); err == nil {
		for i := 0; i < 50; i++ {
			_, err = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`, e.db)
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+e.db+" WITH (FORCE)")
		admin.Close(ctx)
	}
	if opts, err := ch.ParseDSN(e.chURL); err == nil {
		if conn, err := ch.Open(opts); err == nil {
			for _, suffix := range []string{"_kafka", "_direct", "_crash"} {
				_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+e.db+suffix)
			}
			conn.Close()
		}
	}
}

func (e *env) exec(stmts ...string) {
	e.t.Helper()
	for _, s := range stmts {
		if _, err := e.pg.Exec(context.Background(), s); err != nil {
			e.t.Fatalf("%s: %v", s, err)
		}
	}
}

func (e *env) chSink(suffix string) *clickhouse.Sink {
	e.t.Helper()
	s, err := clickhouse.New(context.Background(), clickhouse.Config{DSN: e.chURL, Database: e.db + suffix})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// config names the slot after the test's database: a test binary killed
// mid-run (the OOM killer, a timeout) leaves its slots behind, and a later
// run's test of the same name would otherwise meet one of another database.
func (e *env) config(slot string) replicator.Config {
	if !strings.HasPrefix(slot, e.db) {
		slot = e.db + "_" + slot
	}
	return replicator.Config{ConnString: e.pgURL, Slot: slot, CatchUp: true, Publication: "ferry",
		TextColumns: e.textCols, Logger: zaptest.NewLogger(e.t, zaptest.Level(zap.WarnLevel))}
}

func (e *env) client() kafka.Client {
	return kafka.Client{Brokers: e.brokers, TopicPrefix: "it", Logger: zaptest.NewLogger(e.t, zaptest.Level(zap.WarnLevel))}
}

// publish runs the replicator into Kafka until it has caught up.
func (e *env) publish(slot string, partitions int) {
	e.t.Helper()
	s, err := kafka.New(kafka.Config{Client: e.client(), Database: e.db, Partitions: partitions})
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close()
	r, err := replicator.New(e.config(slot), s, s, s.Capabilities(), kafka.IsRetryable)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
}

// direct runs the replicator straight into ClickHouse until caught up.
func (e *env) direct(slot string) {
	e.t.Helper()
	s := e.chSink("_direct")
	r, err := replicator.New(e.config(slot), s, s, s.Capabilities(), clickhouse.IsRetryable)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		e.t.Fatalf("direct: %v", err)
	}
}

// load runs a loader of the group until it has caught up.
func (e *env) load(dest kafka.Destination, group string, maxRows int) error {
	e.t.Helper()
	l, err := kafka.NewLoader(kafka.LoadConfig{Client: e.client(), Group: group, CatchUp: true, MaxRows: maxRows}, dest)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Run(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		e.t.Fatalf("the loader did not catch up within a minute")
	}
	return nil
}

// tables are the replicated tables mapped for a sink.
func (e *env) tables(s *clickhouse.Sink) []*schema.TableMap {
	e.t.Helper()
	tms, err := replicator.Tables(context.Background(), e.config("x"), s.Capabilities())
	if err != nil {
		e.t.Fatal(err)
	}
	return tms
}

// verifyAll asserts that every table holds the same rows in PostgreSQL and
// in the ClickHouse database of s.
func (e *env) verifyAll(s *clickhouse.Sink) {
	e.t.Helper()
	ctx := context.Background()
	for _, tm := range e.tables(s) {
		width, err := s.ScanColumns(ctx, tm)
		if err != nil {
			e.t.Fatal(err)
		}
		res, err := verify.Table(ctx, tm, func(ctx context.Context, tm *schema.TableMap, fn func([]any) error) error {
			return replicator.ScanTable(ctx, e.pgURL, tm, fn)
		}, s.ScanLiveColumns, verify.Config{DestColumns: width})
		if err != nil {
			e.t.Fatal(err)
		}
		if !res.Match {
			e.t.Errorf("%s differs: %d rows in PostgreSQL, %d in ClickHouse: %v", res.Table, res.SourceRows, res.DestRows, res.Differences)
		}
		if res.SourceRows == 0 && tm.Source.Name != "gone" {
			e.t.Errorf("%s: no rows: the test proves nothing", res.Table)
		}
	}
}

// liveRows are a table's live rows in canonical text, sorted.
func liveRows(t *testing.T, s *clickhouse.Sink, tm *schema.TableMap) []string {
	t.Helper()
	var rows []string
	err := s.ScanLive(context.Background(), tm, func(vals []any) error {
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = schema.Canonical(v)
		}
		rows = append(rows, strings.Join(parts, "\t"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rows)
	return rows
}

const schemaSQL = `CREATE TABLE items (
	id bigint PRIMARY KEY, i8 bigint, n numeric(20,5), un numeric, f float8, r real, b bool, by bytea,
	d date, ts timestamp, tz timestamptz, tm time, u uuid, j jsonb, arr int4[] NOT NULL DEFAULT '{}',
	tarr text[] NOT NULL DEFAULT '{}', lsn pg_lsn, iv interval, big text,
	ntarr text[], narr numeric(20,5)[], unarr numeric[], farr float8[], rarr real[], tzarr timestamptz[], tmarr time[],
	darr date[], uarr uuid[], byarr bytea[], ivarr interval[], jarr jsonb[], lsnarr pg_lsn[], barr bool[], i8arr bigint[])`

// nullableArrays sets the items' nullable arrays, which ferry holds as
// PostgreSQL's array text and sends as JSON arrays.
const nullableArrays = `UPDATE items SET ntarr = ARRAY['a "b"', NULL, 'NULL', 'c,d', 'e\f', 'ü€', '', ' x ', '{}', 'null'],
	narr = '{1.5,NULL,-0.00001}', unarr = '{1e-30,NaN,-12345678901234567890.123}', farr = '{1.5,1e+20,NaN,-Infinity,1e-05,100000,-0}',
	rarr = '{3.4e+38,0.1}', tzarr = '{"2024-05-01 12:00:00.5+00","0044-03-15 12:00:00+00 BC",infinity}', tmarr = '{24:00:00,00:00:00.000001}',
	darr = '{2024-05-01,-infinity,"0044-03-15 BC"}', uarr = '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}', byarr = '{"\\x00ff",""}',
	ivarr = '{"1 year 2 mons",NULL}', jarr = ARRAY['{"k": [1, "x,}"]}'::jsonb, 'null'], lsnarr = '{16/B374D848}', barr = '{t,NULL,f}',
	i8arr = '{9223372036854775807,-9223372036854775808}' WHERE id = 1;
UPDATE items SET ntarr = '{}', narr = '{NULL}', farr = '{}', i8arr = '{NULL,NULL}' WHERE id = 2`

const fullRowSQL = `CREATE TABLE notes (a int, b text); ALTER TABLE notes REPLICA IDENTITY FULL`

const snapshotRows = `INSERT INTO items VALUES
	(1, 9223372036854775807, 123456789012345.12345, 1e-30, 'NaN', '-Infinity', true, '\x00ff10',
	 '0044-03-15 BC', 'infinity', '2024-05-01 12:00:00.123456+02', '24:00:00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
	 '{"k": [1, "x"]}', '{1,NULL,3}', '{"a\"b",NULL,"NULL"}', '16/B374D848', '1 year 2 mons', 'short'),
	(2, -9007199254740993, -0.00001, 'NaN', 0.1, 3.4e38, false, '', '-infinity', '-infinity',
	 '1900-01-01 00:00:00+00', '00:00:00.000001', NULL, NULL, '{}', '{}', NULL, NULL, NULL),
	(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '10000-01-01', '200000-01-01 00:00:00.5',
	 '4713-01-01 00:00:00+00 BC', NULL, NULL, 'null', '{}', '{}', NULL, NULL, NULL)`

// TestKafkaEndToEnd sends a snapshot and a stream of changes through Kafka
// to ClickHouse, and the same changes through the direct path into
// another database: both equal PostgreSQL and each other.
func TestKafkaEndToEnd(t *testing.T) {
	e := newEnv(t)
	if e.chSink("_direct").Capabilities().DateTime64 {
		// Date32 and DateTime64 (ClickHouse 22.8+) hold 1900 to 2299: the
		// rows' BC and far-future dates go as text, as ferry's refusal tells
		// a user to do.
		e.textCols = []string{"public.items.d", "public.items.ts", "public.items.tz"}
	}
	e.exec(schemaSQL, fullRowSQL, "CREATE TABLE gone (id int PRIMARY KEY, v text)", snapshotRows, nullableArrays,
		`INSERT INTO items (id, big) SELECT 10, string_agg(md5(random()::text), '') FROM generate_series(1, 400)`,
		`INSERT INTO notes VALUES (1, 'a'), (4, 'a'), (2, 'b')`, `INSERT INTO gone VALUES (1, 'x')`)
	e.publish("kafka_slot", 3)
	e.direct("direct_slot")

	e.exec(
		`INSERT INTO items (id, i8, big) SELECT g, g * 1000, 'row ' || g FROM generate_series(100, 160) g`,
		`UPDATE items SET i8 = i8 + 1 WHERE id BETWEEN 100 AND 130`,
		`DELETE FROM items WHERE id BETWEEN 140 AND 150`,
		`UPDATE items SET id = 1000 WHERE id = 160`,             // a key change
		`UPDATE items SET i8 = 7 WHERE id = 10`,                 // big is TOASTed and unchanged
		`UPDATE items SET i8 = 8, f = 'Infinity' WHERE id = 10`, // twice in a row
		`UPDATE items SET tz = '2000-02-29 23:59:59.999999-08' WHERE id = 2`,
		`UPDATE items SET ntarr = '{"q\"uote",back\\slash,NULL}', tzarr = '{"2000-02-29 23:59:59.999999-08"}', narr = NULL WHERE id = 1`,
		`INSERT INTO items (id, ntarr, farr) VALUES (2000, '{NULL}', '{0.1,NULL}')`,
		`UPDATE notes SET b = 'c' WHERE a = 2`, `DELETE FROM notes WHERE b = 'c'`, `INSERT INTO notes VALUES (3, NULL)`,
		`TRUNCATE gone`, `INSERT INTO gone VALUES (2, 'after truncate')`)
	e.publish("kafka_slot", 3)
	e.direct("direct_slot")

	viaKafka := e.chSink("_kafka")
	if err := e.load(viaKafka, "it-loader", 0); err != nil {
		t.Fatalf("load: %v", err)
	}
	e.verifyAll(viaKafka)
	direct := e.chSink("_direct")
	e.verifyAll(direct)
	for _, tm := range e.tables(direct) {
		got, want := liveRows(t, viaKafka, tm), liveRows(t, direct, tm)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the Kafka path's rows differ from the direct path's:\n kafka  %q\n direct %q", tm.Name, got, want)
		}
	}

	// A second catch-up of the same group has nothing to do.
	if err := e.load(viaKafka, "it-loader", 0); err != nil {
		t.Fatalf("load again: %v", err)
	}
	e.verifyAll(viaKafka)
}

// crashing writes half of its third batch and then fails, as a loader
// killed in the middle of an INSERT would.
type crashing struct {
	*clickhouse.Sink
	writes int
}

func (c *crashing) Write(ctx context.Context, b *loader.Batch) error {
	c.writes++
	if c.writes < 3 {
		return c.Sink.Write(ctx, b)
	}
	half := &loader.Batch{Table: b.Table, Rows: b.Rows[:len(b.Rows)/2]}
	if err := c.Sink.Write(ctx, half); err != nil {
		return err
	}
	return errKilled
}

var errKilled = &killedError{}

type killedError struct{}

func (*killedError) Error() string { return "killed" }

// TestLoaderKilledMidBatch: a loader that dies after writing part of a
// batch committed nothing of it, so the next one loads everything.
func TestLoaderKilledMidBatch(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, v text, n int)`,
		`INSERT INTO items SELECT g, 'v' || g, 0 FROM generate_series(1, 2000) g`)
	e.publish("crash_slot", 2)
	e.exec(`UPDATE items SET n = n + 1 WHERE id % 3 = 0`, `DELETE FROM items WHERE id % 7 = 0`,
		`INSERT INTO items SELECT g, 'new', 1 FROM generate_series(3000, 3500) g`)
	e.publish("crash_slot", 2)

	sink := e.chSink("_crash")
	err := e.load(&crashing{Sink: sink}, "crash-loader", 400)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the first loader should have died, got %v", err)
	}
	if err := e.load(sink, "crash-loader", 400); err != nil {
		t.Fatalf("load after the crash: %v", err)
	}
	e.verifyAll(sink)
}

// TestKcatReadsEnvelope reads a topic with kcat, an independent client,
// and checks the envelope's fields.
func TestKcatReadsEnvelope(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (Debian package kcat)")
	}
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, n numeric(10,2), at timestamptz)`,
		`INSERT INTO items VALUES (1, 1.50, '2024-05-01 12:00:00.123456+00')`)
	e.publish("kcat_slot", 1)
	ctx := context.Background()
	before := time.Now()
	tx, err := e.pg.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var xid float64 // as encoding/json reads numbers
	if _, err := tx.Exec(ctx, `UPDATE items SET n = 2 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT (txid_current() % 4294967296)::float8`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.exec(`DELETE FROM items WHERE id = 1`)
	after := time.Now()
	e.publish("kcat_slot", 1)
	out, err := exec.Command(kcat, "-b", strings.Join(e.brokers, ","), "-C", "-t", "it.public.items",
		"-o", "beginning", "-e", "-q", "-Z", "-f", "%k\t%h\t%s\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	var ops []string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		key, rest, _ := strings.Cut(line, "\t")
		headers, value, _ := strings.Cut(rest, "\t")
		if value == "NULL" && strings.Contains(headers, "ferry.truncate=") { // the copy's truncation, a control record
			ops = append(ops, "control")
			continue
		}
		if value == "NULL" { // -Z prints a null value so
			ops = append(ops, "tombstone")
			if key != `{"id":1}` {
				t.Errorf("tombstone key %q", key)
			}
			continue
		}
		var env map[string]json.RawMessage
		if err := json.Unmarshal([]byte(value), &env); err != nil {
			t.Fatalf("kcat printed %q: %v", line, err)
		}
		for _, f := range []string{"before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"} {
			if _, ok := env[f]; !ok {
				t.Errorf("envelope %s has no %q", value, f)
			}
		}
		var op string
		_ = json.Unmarshal(env["op"], &op)
		ops = append(ops, op)
		if op == "t" {
			continue
		}
		var src map[string]any
		_ = json.Unmarshal(env["source"], &src)
		if src["connector"] != "postgresql" || src["db"] != e.db || src["schema"] != "public" || src["table"] != "items" || src["lsn"] == nil {
			t.Errorf("source block %s", env["source"])
		}
		commitMs, _ := src["ts_ms"].(float64)
		var published float64
		_ = json.Unmarshal(env["ts_ms"], &published)
		switch {
		case op == "r" && (src["txId"] != nil || src["snapshot"] != "first" || commitMs <= 0): // the copy's first row
			t.Errorf("a snapshot row's source should have no txId, snapshot true and the copy's time: %s", env["source"])
		case op == "u" && src["txId"] != xid:
			t.Errorf("the update's source.txId is %v, want the transaction's xid %v", src["txId"], xid)
		case op != "r" && (commitMs < float64(before.UnixMilli()-1000) || commitMs > float64(after.UnixMilli()+1000)):
			t.Errorf("%s: source.ts_ms %v is not the commit time (between %d and %d)", op, commitMs, before.UnixMilli(), after.UnixMilli())
		case published < commitMs:
			t.Errorf("%s: published (ts_ms %v) before the commit (source.ts_ms %v)", op, published, commitMs)
		}
		if key != `{"id":1}` || !strings.Contains(headers, "ferry.schema=") {
			t.Errorf("key %q, headers %q", key, headers)
		}
		if op == "r" && string(env["after"]) != `{"id":1,"n":"AJY=","at":"2024-05-01T12:00:00.123456Z"}` {
			t.Errorf("snapshot row's after is %s", env["after"])
		}
	}
	if got := strings.Join(ops, ","); got != "control,r,u,d,tombstone" {
		t.Errorf("ops %s, want control,r,u,d,tombstone (the copy's truncation as a control record, the snapshot row (n in precise mode: "+
			"150 unscaled, base64), the update, the delete and its tombstone)", got)
	}
}
