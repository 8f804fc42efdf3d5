package kafka_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ferry-cdc/ferry/loader/kafka"
)

// storedRows counts every row version ClickHouse holds for table, merged
// or not: it grows with each write, whatever the write was.
func (e *env) storedRows(t *testing.T, db, table string) func() uint64 {
	t.Helper()
	opts, err := ch.ParseDSN(e.chURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return func() uint64 {
		var n uint64
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+db+"."+table).Scan(&n); err != nil {
			return 0 // not there yet
		}
		return n
	}
}

// settle waits until count stays the same for half a second.
func settle(count func() uint64) {
	for n := count(); ; {
		time.Sleep(500 * time.Millisecond)
		m := count()
		if m == n {
			return
		}
		n = m
	}
}

// resumeWithin is the recovery the issue asks for: a restarted loader
// writes again within about a minute of its start.
const resumeWithin = 60 * time.Second

// TestLoaderResumesSoonAfterKill restarts `ferry load` right after a
// SIGKILL, three times, and once after a SIGTERM, while rows flow, and
// measures the time from each restart to its first write. The killed
// member's session is still alive at the broker when its successor joins:
// the successor must not sit idle until it expires.
func TestLoaderResumesSoonAfterKill(t *testing.T) {
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
	defer stopPublisher()
	stopChurn := make(chan struct{})
	churned := e.churn(stopChurn)
	defer func() { close(stopChurn); <-churned }()

	db := e.db + "_crash"
	sink := e.chSink("_crash")
	stored := e.storedRows(t, db, e.tables(sink)[0].Name)
	waitWrite := func(p *loaderProc, what string) time.Duration {
		t.Helper()
		start, before := time.Now(), stored()
		for stored() == before {
			if time.Since(start) > 5*time.Minute { // a hang, not a slow start
				t.Fatalf("%s: the loader wrote nothing in 5 minutes:\n%s", what, p.logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(start)
	}
	p := e.startLoader(bin, db, "resume")
	t.Logf("first start: first write after %s", waitWrite(p, "first start").Round(time.Millisecond))
	var took []time.Duration
	for round := 0; round < 4; round++ {
		what := "after SIGKILL"
		if round == 3 {
			what = "after SIGTERM"
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			<-p.exited
		} else {
			time.Sleep(time.Second) // let it hold its partitions a while
			select {
			case <-p.exited:
				t.Fatalf("the loader ended before the kill: %v\n%s", p.err, p.logs)
			default:
			}
			p.kill(t)
		}
		settle(stored) // a write the dead process sent may still land
		p = e.startLoader(bin, db, "resume")
		d := waitWrite(p, what)
		took = append(took, d)
		t.Logf("restart %d %s: first write after %s", round+1, what, d.Round(time.Millisecond))
	}
	for i, d := range took {
		if d > resumeWithin {
			t.Errorf("restart %d: the loader resumed after %s, not within %s", i+1, d.Round(time.Millisecond), resumeWithin)
		}
	}
}
