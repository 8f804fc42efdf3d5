package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// chTry runs a ClickHouse query that returns one String.
func (e *opsEnv) chTry(q string) (string, error) {
	conn, err := e.chConn()
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var s string
	err = conn.QueryRow(context.Background(), q).Scan(&s)
	return s, err
}

func (e *opsEnv) chString(q string) string {
	e.t.Helper()
	s, err := e.chTry(q)
	if err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return s
}

// live is a fingerprint of a ClickHouse table's live rows: count and sums
// (the error's text while the table does not exist yet).
func (e *opsEnv) live(table string) string {
	s, err := e.chTry(`SELECT concat(toString(count()), '/', toString(sum(id)), '/', toString(sum(length(v))))
		FROM ` + e.name + `.` + table + ` FINAL WHERE _ferry_deleted = 0`)
	if err != nil {
		return err.Error()
	}
	return s
}

// chPut writes a row into a ClickHouse table behind ferry's back (a
// batch: ClickHouse 18.16 takes no VALUES in a native-protocol INSERT).
func (e *opsEnv) chPut(table string, id int64, v string, version uint64) {
	e.t.Helper()
	conn, err := e.chConn()
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+e.name+"."+table+" (id, v, _ferry_version, _ferry_deleted)")
	if err == nil {
		err = batch.Append(id, v, version, uint8(0))
	}
	if err == nil {
		err = batch.Send()
	}
	if err != nil {
		e.t.Fatalf("write a row into ClickHouse table %s: %v", table, err)
	}
}

func (e *opsEnv) pgLive(table string) string {
	e.t.Helper()
	var s string
	if err := e.pg.QueryRow(context.Background(), `SELECT count(*) || '/' || coalesce(sum(id), 0) || '/' || coalesce(sum(length(v)), 0) FROM `+table).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// TestResyncAndRepair: ferry resync copies one table afresh into a shadow
// table and swaps it in while ferry run streams, with writes going on to
// it and to another table; rows ClickHouse had wrong (put there behind
// ferry's back) are gone after it, and no write is lost. ferry verify
// --repair does the same for the tables it finds different, and says so.
func TestResyncAndRepair(t *testing.T) {
	e := newOpsEnv(t)
	e.exec("CREATE TABLE a (id bigint PRIMARY KEY, v text)", "CREATE TABLE b (id bigint PRIMARY KEY, v text)",
		"INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 20000) g",
		"INSERT INTO b SELECT g, 'b' || g FROM generate_series(1, 2000) g")
	// No metrics address: the default one is the same for every ferry on
	// the machine, and a second make test beside this one would take it.
	stop := e.start(e.args("run", "--metrics-addr", "")...)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := stop()
			t.Logf("ferry run's output:\n%s", tail(out))
		}
	})
	caughtUp := func(what string) {
		t.Helper()
		testkit.WaitFor(t, 3*time.Minute, what, func() bool {
			return e.live("a") == e.pgLive("a") && e.live("b") == e.pgLive("b")
		})
	}
	caughtUp("the initial copy")

	// Damage table a in ClickHouse: a row PostgreSQL never had, and a row
	// altered with a version above any the stream writes.
	e.chPut("a", 999999, "bogus", 1)
	e.chPut("a", 5, "altered", 1<<63)
	if out, err := e.ferry(e.args("verify")...); err == nil || !strings.Contains(out, "DIFFERS  public.a") {
		t.Fatalf("verify after the damage: %v, want public.a reported as differing\n%s", err, out)
	}

	// Writes to both tables while the resync runs.
	var wg sync.WaitGroup
	var writes atomic.Int64
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			for _, q := range []string{
				fmt.Sprintf("INSERT INTO a VALUES (%d, 'new')", 100000+i), fmt.Sprintf("UPDATE a SET v = 'upd%d' WHERE id = %d", i, 1+i%20000),
				fmt.Sprintf("DELETE FROM a WHERE id = %d", 20000-i), fmt.Sprintf("INSERT INTO b VALUES (%d, 'new')", 100000+i),
			} {
				if _, err := e.pg.Exec(context.Background(), q); err != nil {
					t.Errorf("%s: %v", q, err)
					return
				}
			}
			writes.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	out, err := e.ferry(e.args("resync", "public.a")...)
	close(done)
	wg.Wait()
	if err != nil || !strings.Contains(out, "resync done") {
		t.Fatalf("ferry resync public.a: %v\n%s", err, out)
	}
	t.Logf("ferry resync, with %d rounds of writes beside it:\n%s", writes.Load(), out)
	caughtUp("catch-up after the resync")
	if v := e.chString(`SELECT toString(count()) FROM ` + e.name + `.a FINAL WHERE id = 999999 OR v = 'altered'`); v != "0" {
		t.Errorf("after the resync ClickHouse still holds %s of the rows put there behind ferry's back", v)
	}
	if out, err := e.ferry(e.args("verify")...); err != nil {
		t.Fatalf("verify after the resync: %v\n%s", err, out)
	}

	// verify --repair finds table b different and copies it again.
	e.chPut("b", 7, "altered", 1<<63)
	out, err = e.ferry(e.args("verify", "--repair")...)
	if err != nil {
		t.Fatalf("verify --repair: %v\n%s", err, out)
	}
	for _, want := range []string{"DIFFERS  public.b", "repair: copying [public.b] afresh", "resync done", "repair: 1 of 1 tables repaired", "all 2 tables match"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify --repair does not say %q:\n%s", want, out)
		}
	}
	if e.live("b") != e.pgLive("b") {
		t.Errorf("table b after verify --repair: ClickHouse %s, PostgreSQL %s", e.live("b"), e.pgLive("b"))
	}

	// Refusals name the table and the fix.
	e.exec("CREATE TABLE keyless (v text)")
	for table, want := range map[string]string{"public.nope": "does not exist", "public.keyless": "ALTER PUBLICATION ferry ADD TABLE"} {
		if out, err := e.ferry(e.args("resync", table)...); err == nil || !strings.Contains(out, table) || !strings.Contains(out, want) {
			t.Errorf("ferry resync %s: %v, want an error naming it and saying %q\n%s", table, err, want, out)
		}
	}
	if out, err := stop(); err != nil {
		t.Fatalf("ferry run: %v\n%s", err, out)
	} else if !strings.Contains(out, "resync done") {
		t.Errorf("ferry run's log does not report the resync:\n%s", out)
	}
}
