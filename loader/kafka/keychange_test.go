package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"
	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/loader/kafka"
)

// keyChangeSQL makes a table whose body is stored out of line (STORAGE
// EXTERNAL, 5 kB): an update that leaves it alone sends it as unchanged,
// also when the update changes the key.
const keyChangeSQL = `CREATE TABLE docs (id bigint PRIMARY KEY, n int, body text);
	ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;
	INSERT INTO docs SELECT g, 0, g || ':' || (SELECT string_agg(md5(g::text || s::text), '') FROM generate_series(1, 160) s)
		FROM generate_series(1, 60) g`

// keyChanges are updates that change the key and leave body unchanged, in
// every shape the loader must handle.
var keyChanges = []string{
	`UPDATE docs SET id = id + 1000000 WHERE id = 1`,                                            // one row
	`UPDATE docs SET id = id + 1000000, n = n + 1 WHERE id BETWEEN 2 AND 25`,                    // many rows, all partitions
	`UPDATE docs SET id = 5000 WHERE id = 26; UPDATE docs SET id = 6000, n = 2 WHERE id = 5000`, // twice in one transaction
	`UPDATE docs SET id = 7000 WHERE id = 27`,
	`UPDATE docs SET body = 'new ' || body WHERE id = 7000`, // then the body changes
	`UPDATE docs SET n = 9 WHERE id = 7000`,                 // and is unchanged again
	`INSERT INTO docs VALUES (1, 1, 'a key moved away is used again')`,
	`DELETE FROM docs WHERE id = 30; UPDATE docs SET id = 30 WHERE id = 31`, // onto a deleted key
	`UPDATE docs SET id = 8000 WHERE id = 32; UPDATE docs SET n = 3 WHERE id = 8000; DELETE FROM docs WHERE id = 8000`,
	`UPDATE docs SET id = 9033 WHERE id = 1000001; UPDATE docs SET id = 1000001 WHERE id = 9033`, // there and back
	`UPDATE docs SET id = -id WHERE id BETWEEN 40 AND 60`,
}

// TestKafkaKeyChangeUnchanged: key changes that leave a TOASTed column
// unchanged reach ClickHouse through Kafka with the column's value, however
// the loader meets the old key's delete and the new key's row: on
// different partitions, in different batches, read by different members
// of a group, and again after a loader died mid-batch. ClickHouse equals
// PostgreSQL and the direct path.
func TestKafkaKeyChangeUnchanged(t *testing.T) {
	e := newEnv(t)
	e.exec(keyChangeSQL)
	e.publish("kc_kafka", 4)
	e.direct("kc_direct")
	e.exec(keyChanges...)
	e.publish("kc_kafka", 4)
	e.direct("kc_direct")
	direct := e.chSink("_direct")
	e.verifyAll(direct)
	want := liveRows(t, direct, e.tables(direct)[0])

	check := func(name string, load func(suffix string) error, suffix string) {
		t.Run(name, func(t *testing.T) {
			if err := load(suffix); err != nil {
				t.Fatalf("load: %v", err)
			}
			s := e.chSink(suffix)
			e.verifyAll(s)
			if got := liveRows(t, s, e.tables(s)[0]); !slices.Equal(got, want) {
				t.Errorf("the Kafka path's rows differ from the direct path's: %d rows, want %d", len(got), len(want))
			}
		})
	}
	check("one loader, batches of 3", func(suffix string) error {
		return e.load(e.chSink(suffix), "kc-small", 3)
	}, "_small")
	check("one loader, one batch", func(suffix string) error {
		return e.load(e.chSink(suffix), "kc-one", 0)
	}, "_kafka")
	check("two loaders in a group", func(suffix string) error {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = e.load(e.chSink(suffix), "kc-pair", 4)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}, "_pair")
	check("killed mid-batch, restarted", func(suffix string) error {
		sink := e.chSink(suffix)
		if err := e.load(&crashing{Sink: sink}, "kc-crash", 7); err == nil {
			t.Fatal("the first loader should have died")
		}
		return e.load(sink, "kc-crash", 7)
	}, "_crash")
	check("killed after a write, restarted", func(suffix string) error {
		sink := e.chSink(suffix)
		for _, n := range []int{2, 5} {
			if err := e.load(&dyingAfter{Sink: sink, writes: n}, "kc-dying", 3); err == nil {
				t.Fatal("the loader should have died")
			}
		}
		return e.load(sink, "kc-dying", 3)
	}, "_dying")
	t.Cleanup(func() {
		if opts, err := ch.ParseDSN(e.chURL); err == nil {
			if conn, err := ch.Open(opts); err == nil {
				for _, suffix := range []string{"_small", "_pair", "_dying"} {
					_ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+e.db+suffix)
				}
				conn.Close()
			}
		}
	})
}

// dyingAfter fails right after its writes-th write succeeded, as a loader
// killed before it committed the offsets would: the next one writes those
// rows again.
type dyingAfter struct {
	*clickhouse.Sink
	writes int
}

func (d *dyingAfter) Write(ctx context.Context, b *loader.Batch) error {
	if err := d.Sink.Write(ctx, b); err != nil {
		return err
	}
	if d.writes--; d.writes == 0 {
		return errKilled
	}
	return nil
}

// keyChurn moves keys of docs until stopped, leaving body unchanged: one
// key, one key twice in a transaction, fifty at once; now and then it
// changes a body. Every row keeps its id modulo 1000000, so no move
// collides.
func (e *env) keyChurn(stop <-chan struct{}) <-chan int {
	done := make(chan int, 1)
	go func() {
		conn, err := pgx.Connect(context.Background(), e.pgURL)
		if err != nil {
			e.t.Error(err)
			done <- 0
			return
		}
		defer conn.Close(context.Background())
		move := `UPDATE docs SET id = id + 1000000, n = n + 1 WHERE id = (SELECT id FROM docs WHERE id %% 1000000 = %d)`
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- i
				return
			default:
			}
			r := rand.IntN(2000) + 1
			q := fmt.Sprintf(move, r)
			switch {
			case i%25 == 0:
				q = `UPDATE docs SET id = id + 1000000 WHERE id IN (SELECT id FROM docs ORDER BY random() LIMIT 50)`
			case i%10 == 0:
				q = fmt.Sprintf(`UPDATE docs SET body = '%d ' || body WHERE id %% 1000000 = %d`, i, r)
			case i%7 == 0:
				q += "; " + q
			}
			if _, err := conn.Exec(context.Background(), q); err != nil {
				e.t.Errorf("key churn: %v", err)
				done <- i
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return done
}

// TestLoaderProcessKilledKeyChanges SIGKILLs `ferry load --from-kafka`
// processes while keys move and leave their TOASTed bodies unchanged; a
// last --catch-up run leaves ClickHouse equal to PostgreSQL, bodies
// included.
func TestLoaderProcessKilledKeyChanges(t *testing.T) {
	e := newEnv(t)
	bin := buildFerry(t)
	e.exec(`CREATE TABLE docs (id bigint PRIMARY KEY, n int, body text);
		ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;
		INSERT INTO docs SELECT g, 0, g || ':' || (SELECT string_agg(md5(g::text || s::text), '') FROM generate_series(1, 100) s)
			FROM generate_series(1, 2000) g`)
	slot := e.db + "_k"
	e.publish(slot, 4)
	pub, err := kafka.New(kafka.Config{Client: e.client(), Database: e.db, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	stopPublisher := e.inBackground(slot, pub, pub, pub.Capabilities(), kafka.IsRetryable)
	stopChurn := make(chan struct{})
	churned := e.keyChurn(stopChurn)

	db := e.db + "_crash"
	sink := e.chSink("_crash")
	tm := e.tables(sink)[0]
	for round := 0; round < 3; round++ {
		before := e.maxVersion(db)
		p := e.startLoader(bin, db, "kc-kill")
		deadline := time.Now().Add(45 * time.Second)
		for e.maxVersion(db) == before { // wait until this one writes
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the loader wrote nothing in 45s:\n%s", round, p.logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
		p.kill(t)
		t.Logf("round %d: killed the loader at version %d (from %d), %d live rows", round, e.maxVersion(db), before, liveCount(sink, tm))
	}
	close(stopChurn)
	n := <-churned
	if n < 100 {
		t.Fatalf("the writer moved keys %d times: the kills did not happen while keys moved", n)
	}
	t.Logf("%d key-changing transactions", n)
	stopPublisher()
	e.publish(slot, 4)
	last := e.startLoader(bin, db, "kc-kill", "--catch-up")
	last.wait(t, 5*time.Minute) // generous, as in TestLoaderProcessKilled
	e.verifyAll(sink)
}

// maxVersion is the highest _ferry_version in db.docs, 0 before it exists.
func (e *env) maxVersion(db string) uint64 {
	opts, err := ch.ParseDSN(e.chURL)
	if err != nil {
		e.t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	var v uint64
	_ = conn.QueryRow(context.Background(), "SELECT max(_ferry_version) FROM "+db+".docs").Scan(&v)
	return v
}

// TestCatchUpStallWithParkedPartitions: a member of the group that never
// reads holds one of the two partitions, and the loader's waits for the
// key changes' carriers on it. The catch-up stalls as it would with no
// key changes: the loader joins the group again (reading what it held
// back again), and after --retry-for ends with the stall's error, not
// after keyChangeWait's ten minutes. Once the member is gone, a loader of
// the group catches up and ClickHouse equals PostgreSQL.
func TestCatchUpStallWithParkedPartitions(t *testing.T) {
	e := newEnv(t)
	e.exec(keyChangeSQL)
	e.publish("kc_parked", 2)
	e.exec(keyChanges...)
	e.publish("kc_parked", 2)
	// A queue longer than the topic: a reader blocked on a full queue
	// cannot rejoin its group, and would lose its partition. The range
	// balancer orders members by ID, which starts with the client ID: "!"
	// sorts before any loader's, so the holder keeps partition 0 through
	// the loader's rejoins. (With random member IDs alone the partitions
	// changed hands at rejoins in one CI run on a busy machine, and the
	// loader, given the carriers' partition in turn, made slow progress
	// instead of stalling: a test of luck.)
	holder := kafkago.NewReader(kafkago.ReaderConfig{Brokers: e.brokers, GroupID: "kc-parked", GroupTopics: []string{"it.public.docs"},
		StartOffset: kafkago.FirstOffset, HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second, QueueCapacity: 100000,
		Dialer:         &kafkago.Dialer{ClientID: "!holder", Timeout: 10 * time.Second},
		GroupBalancers: []kafkago.GroupBalancer{kafkago.RangeGroupBalancer{}}})
	defer holder.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := holder.FetchMessage(ctx); err != nil { // a member now, with both partitions
		t.Fatal(err)
	}
	sink := e.chSink("_kafka")
	logs, seen := observer.New(zapcore.InfoLevel)
	client := e.client()
	client.Logger = zap.New(zapcore.NewTee(client.Logger.Core(), logs))
	l, err := kafka.NewLoader(kafka.LoadConfig{Client: client, Group: "kc-parked", CatchUp: true, RetryFor: 45 * time.Second}, sink)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 6*time.Minute) // a hang detector: about 80 s when well
	defer cancel()
	err = l.Run(ctx)
	t.Logf("the loader returned after %s: %v", time.Since(start).Round(time.Millisecond), err)
	rejoins := seen.FilterMessage("catching up, but nothing read for a while: joining the group again").All()
	parked := 0
	for _, r := range rejoins {
		if n, _ := r.ContextMap()["parked_partitions"].(int64); n > 0 {
			parked++
		}
	}
	if parked < 2 {
		t.Fatalf("want at least two rejoins with a partition parked (the holder kept its partition, and carriers on it), got %d of %d", parked, len(rejoins))
	}
	if ctx.Err() != nil || err == nil || !strings.Contains(err.Error(), "read nothing for") || !strings.Contains(err.Error(), "kc-parked") {
		t.Fatalf("want the stall's error naming the group after --retry-for, got %v", err)
	}
	holder.Close()
	if err := e.load(sink, "kc-parked", 0); err != nil {
		t.Fatalf("load once the member is gone: %v", err)
	}
	e.verifyAll(sink)
}
