package chaostest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRejectedBatch makes ClickHouse reject a batch, behind ferry's back:
// either a column's type changed to one the next value cannot be stored
// in, or a MATERIALIZED column whose expression throws for one value (the
// server itself refuses the INSERT). ferry must exit non-zero with an error
// naming the table, the column and the key; the slot must not confirm the
// failing change; and once the table is fixed, a restarted ferry must
// write the failing change and everything after it.
func TestRejectedBatch(t *testing.T) {
	cases := []struct {
		name       string
		breakIt    string // ALTER on the ClickHouse table
		fixIt      string
		value      string // the code value of the failing change
		wantInErr  []string
		serverSide bool
	}{
		{name: "type", breakIt: "MODIFY COLUMN rev UInt16", fixIt: "MODIFY COLUMN rev Int32",
			value: "7", wantInErr: []string{`"rev"`}},
		{name: "server", breakIt: "ADD COLUMN chaos_check UInt8 MATERIALIZED throwIf(code = 'reject-me')",
			fixIt: "DROP COLUMN chaos_check", value: "reject-me", serverSide: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := newScenario(t, "reject_"+c.name)
			sc.w.start()
			f := sc.start()
			sc.recover(f)
			time.Sleep(sc.m.runBetween)
			if err := sc.w.stop(); err != nil {
				t.Fatal(err)
			}
			sc.recover(f)
			sc.chExec("ALTER TABLE `" + sc.name + "`.accounts " + c.breakIt)

			// The failing change, then more changes that must not be skipped.
			const badID = 7
			// An upsert: the writer's random deletes may have removed the
			// row, and an UPDATE of no row would make no failing change.
			sc.pgExec(fmt.Sprintf(`INSERT INTO accounts (id, rev, balance, code, note) VALUES (%[2]d, 1, 0, '%[1]s', 'bad')
				ON CONFLICT (id) DO UPDATE SET code = EXCLUDED.code, rev = accounts.rev + 1`, c.value, badID))
			// Past its commit: a confirmed position below it makes the next
			// start decode the transaction again. (A position taken before it
			// was passed rightly once: a record written in between (ferry's
			// heartbeat, or PostgreSQL's snapshot of running transactions)
			// and confirmed while nothing was pending. The check after the
			// fix below is the one that sees a change skipped.)
			afterBad := sc.walLSN()
			sc.pgExec(`INSERT INTO accounts (id, rev, balance, code, note) SELECT g, 1, 0, '1', 'after' FROM generate_series(900000001, 900000100) g`,
				`INSERT INTO docs SELECT g, 1, 'after', `+docBody+` FROM generate_series(900000001, 900000010) g`)
			err := f.wait(time.Minute)
			if err == nil {
				t.Fatalf("ferry exited 0 after ClickHouse rejected a batch")
			}
			out := sc.log.String()
			msg := out[max(0, strings.LastIndex(out, "ferry: ")):]
			for _, want := range append([]string{"accounts", fmt.Sprintf("id=%d", badID)}, c.wantInErr...) {
				if !strings.Contains(msg, want) {
					t.Errorf("ferry's error does not name %s:\n%s", want, msg)
				}
			}
			var past bool
			if err := sc.pgQuery(`SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, &past, sc.name, afterBad); err != nil {
				t.Fatal(err)
			}
			if past {
				t.Errorf("the slot confirmed %s, past the rejected change's commit (before %s)", sc.confirmed(), afterBad)
			}

			sc.chExec("ALTER TABLE `" + sc.name + "`.accounts " + c.fixIt)
			fixed := time.Now()
			tl := sc.check()
			recovery := time.Since(fixed)
			var code string
			if err := sc.chQuery(fmt.Sprintf("SELECT code FROM `%s`.accounts FINAL WHERE id = %d", sc.name, badID), &code); err != nil || code != c.value {
				t.Errorf("after the fix, ClickHouse holds code %q for id %d (%v), want %q", code, badID, err, c.value)
			}
			record(t, result{scenario: "ClickHouse rejects a batch: " + c.name, runs: 1, written: sc.written() + 111,
				lost: tl.lost, doubled: tl.doubled, peakRSS: sc.peakRSS(), recovery: recovery,
				note: "ferry exits 1, slot not confirmed past the change; recovery: fix, then ferry run --catch-up; error: " + short(firstLine(msg), 230)})
		})
	}
}

func (sc *scenario) pgExec(stmts ...string) {
	sc.t.Helper()
	if err := sc.s.pg.exec(context.Background(), sc.name, stmts...); err != nil {
		sc.t.Fatal(err)
	}
}

func (sc *scenario) chExec(q string) {
	sc.t.Helper()
	conn, err := sc.s.ch.open("")
	if err != nil {
		sc.t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(context.Background(), q); err != nil {
		sc.t.Fatalf("%s: %v", q, err)
	}
}

func (sc *scenario) chQuery(q string, dest any) error {
	conn, err := sc.s.ch.open("")
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.QueryRow(context.Background(), q).Scan(dest)
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func firstLine(s string) string {
	s = strings.TrimPrefix(s, "ferry: ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
