package kafka_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/schema"
)

// buildFerry builds the ferry command into a temporary directory.
func buildFerry(t *testing.T) string { return testkit.BuildFerry(t) }

// loaderProc is one `ferry load --from-kafka` process.
type loaderProc struct {
	cmd    *exec.Cmd
	logs   *testkit.Buffer
	exited chan struct{} // closed once the process ended; err is then set
	err    error
}

// startLoader runs the ferry binary's loader against the test's broker and
// the ClickHouse database db. The environment is the test's without
// FERRY_* variables, so only the flags given here count.
func (e *env) startLoader(bin, db, group string, extra ...string) *loaderProc {
	e.t.Helper()
	args := append([]string{"--log-format", "json", "load", "--from-kafka", "--kafka-brokers", strings.Join(e.brokers, ","),
		"--topic-prefix", "it", "--ch", e.chURL, "--ch-database", db, "--group", group, "--batch-rows", "300",
		"--metrics-addr", ""}, extra...)
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FERRY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	p := &loaderProc{cmd: cmd, logs: &testkit.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	e.t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to end.
func (p *loaderProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if <-p.exited; p.err == nil {
		t.Fatalf("the loader ended by itself before the kill:\n%s", p.logs)
	}
}

// wait waits for a --catch-up loader to exit 0.
func (p *loaderProc) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	start := time.Now()
	select {
	case <-p.exited:
		t.Logf("the loader exited after %s", time.Since(start).Round(time.Millisecond))
		if p.err != nil {
			t.Fatalf("the loader failed: %v\n%s", p.err, p.logs)
		}
	case <-time.After(limit):
		t.Fatalf("the loader did not catch up within %s:\n%s", limit, p.logs)
	}
}

// partitions lists the partitions whose messages the process read, from
// its "consumer session ended" log lines.
func (p *loaderProc) partitions(t *testing.T) map[string]int {
	t.Helper()
	read := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(p.logs.String()))
	for sc.Scan() {
		var line struct {
			Msg  string         `json:"msg"`
			Read map[string]int `json:"messages_by_partition"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "consumer session ended" {
			for k, n := range line.Read {
				read[k] += n
			}
		}
	}
	return read
}

// churn writes to items until stopped: inserts, single-row updates and
// deletes, and now and then an update of many rows.
func (e *env) churn(stop <-chan struct{}) <-chan int {
	done := make(chan int, 1)
	go func() {
		conn, err := pgx.Connect(context.Background(), e.pgURL)
		if err != nil {
			e.t.Error(err)
			done <- 0
			return
		}
		defer conn.Close(context.Background())
		i := 0
		for ; ; i++ {
			select {
			case <-stop:
				done <- i
				return
			default:
			}
			q := fmt.Sprintf(`INSERT INTO items VALUES (%d, %d, 'new'); UPDATE items SET a = a + 1 WHERE id = %d;
				DELETE FROM items WHERE id = %d`, 100000+i, i, rand.IntN(20000)+1, rand.IntN(20000)+1)
			if i%50 == 0 {
				q += fmt.Sprintf(`; UPDATE items SET v = 'bulk %d' WHERE id %% 40 = %d`, i, i%40)
			}
			if _, err := conn.Exec(context.Background(), q); err != nil {
				e.t.Errorf("churn: %v", err)
				done <- i
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return done
}

// liveCount is the table's live row count, 0 before it exists.
func liveCount(s *clickhouse.Sink, tm *schema.TableMap) uint64 {
	n, _ := s.CountLive(context.Background(), tm)
	return n
}

// TestLoaderProcessKilled runs `ferry load --from-kafka` as a process and
// SIGKILLs it several times while it writes and while the publisher keeps
// publishing; a last --catch-up run then leaves ClickHouse equal to
// PostgreSQL.
func TestLoaderProcessKilled(t *testing.T) {
	e := newEnv(t)
	bin := buildFerry(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, a int, v text)`,
		`INSERT INTO items SELECT g, g, md5(g::text) FROM generate_series(1, 20000) g`)
	slot := e.db + "_k"
	e.publish(slot, 4)
	pub, err := kafka.New(kafka.Config{Client: e.client(), Database: e.db, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	stopPublisher := e.inBackground(slot, pub, pub, pub.Capabilities(), kafka.IsRetryable)
	stopChurn := make(chan struct{})
	churned := e.churn(stopChurn)

	db := e.db + "_crash"
	sink := e.chSink("_crash")
	tm := e.tables(sink)[0]
	kills := 0
	for round := 0; round < 4; round++ {
		before := liveCount(sink, tm)
		p := e.startLoader(bin, db, "kill-loader")
		deadline := time.Now().Add(45 * time.Second)
		for liveCount(sink, tm) == before { // wait until this one writes
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the loader wrote nothing in 45s:\n%s", round, p.logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
		p.kill(t)
		kills++
		t.Logf("round %d: killed the loader at %d live rows (from %d)", round, liveCount(sink, tm), before)
	}
	close(stopChurn)
	if n := <-churned; n < 100 {
		t.Fatalf("the writer wrote %d times: the kills did not happen while rows flowed", n)
	}
	stopPublisher()
	e.publish(slot, 4)
	last := e.startLoader(bin, db, "kill-loader", "--catch-up")
	// Generous: it waits up to the last killed member's session timeout
	// (10s, TestLoaderResumesSoonAfterKill measures it), then loads
	// everything since the last commit 300 rows a write, which on a
	// loaded machine takes minutes.
	last.wait(t, 10*time.Minute)
	t.Logf("the last loader read %v", last.partitions(t))
	if kills < 4 {
		t.Fatalf("%d kills", kills)
	}
	e.verifyAll(sink)
}

// TestTwoLoaderProcessesShareGroup runs two loader processes in one group:
// both read some partitions, together all of them, and ClickHouse equals
// PostgreSQL.
func TestTwoLoaderProcessesShareGroup(t *testing.T) {
	e := newEnv(t)
	bin := buildFerry(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, a int, v text)`,
		`INSERT INTO items SELECT g, g, md5(g::text) FROM generate_series(1, 20000) g`)
	slot := e.db + "_k"
	e.publish(slot, 4)
	stopChurn := make(chan struct{})
	churned := e.churn(stopChurn)
	time.Sleep(3 * time.Second)
	close(stopChurn)
	<-churned
	e.publish(slot, 4)

	db := e.db + "_kafka"
	a := e.startLoader(bin, db, "pair", "--catch-up")
	b := e.startLoader(bin, db, "pair", "--catch-up")
	a.wait(t, 5*time.Minute)
	b.wait(t, 5*time.Minute)
	pa, pb := a.partitions(t), b.partitions(t)
	t.Logf("messages by partition: first loader %v, second %v", pa, pb)
	if len(pa) == 0 || len(pb) == 0 {
		t.Errorf("a loader read nothing: first %v, second %v", pa, pb)
	}
	for i := 0; i < 4; i++ {
		k := fmt.Sprintf("it.public.items/%d", i)
		if pa[k]+pb[k] == 0 {
			t.Errorf("nobody read partition %s", k)
		}
	}
	e.verifyAll(e.chSink("_kafka"))
}
