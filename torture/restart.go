package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// Server restarts as faults (issue 15): PostgreSQL stopped fast (SIGINT)
// or crash-like (SIGQUIT, pg_ctl's immediate mode: WAL recovery at the
// start, a logical slot's state as of its last save), ClickHouse stopped
// in order (SIGTERM) or killed, each at an offset from ferry's first start
// or at the first moment after it that ferry's log shows a phase begin:
// an initial copy ("copy"), a table rebuild ("rebuild"), or for
// ClickHouse a write in flight ("write": ferry sending it a burst of
// bytes through the proxy). Only servers
// of torture's own are restarted (Private); a plan that has restart faults
// runs there.

// restartKinds are the restart faults, by how they stop the server.
var restartKinds = map[string]string{
	"restart-pg": "PostgreSQL fast shutdown (SIGINT) and start",
	"crash-pg":   "PostgreSQL immediate shutdown (SIGQUIT: crash recovery at the start) and start",
	"restart-ch": "ClickHouse stopped with SIGTERM and started",
	"crash-ch":   "ClickHouse killed (SIGKILL) and started",
}

// phaseMarks are the log messages of ferry's where a phase begins, and
// where it is over (the first message after it that the phase has ended).
var phaseMarks = map[string]struct{ begin, end []string }{
	"copy": {
		begin: []string{"created slot; copying tables", "copying a table whose rows ClickHouse lacks", "a new table joined replication"},
		end:   []string{`"streaming"`, "msg=streaming", "\tstreaming\t"},
	},
	// A rebuild copies the table into a new one and swaps it in: after a
	// schema change in the stream, or at a start that finds the table
	// changed, or its last copy cut short.
	"rebuild": {
		begin: []string{"schema change needs the ClickHouse table rebuilt", "replacing it with a fresh copy",
			"replacing the partial ClickHouse table with a fresh copy", "rebuilding its table"},
		end: []string{"schema change applied", `"streaming"`, "msg=streaming", "\tstreaming\t"},
	},
	// "write" has no marks: it is a burst of bytes from ferry to
	// ClickHouse through the proxy (writeBurst).
}

// writeBurst is how many bytes ferry must have sent ClickHouse within one
// tick of the restarter for a write (an INSERT's data) to be in flight.
const writeBurst = 2048

// phaseGrace is how long after the workload's end a fault still waits for
// its phase when ferry does not catch up with the workload (a ferry that
// lost PostgreSQL a few times waits seconds before it tries again).
const phaseGrace = 90 * time.Second

// restartStream is the PCG stream the restart faults are drawn from: a
// stream of their own, so that a size without restarts generates exactly
// the plans it did before they existed.
const restartStream = 0x7265737461727473

// addRestarts gives some rounds (one in sz.RestartEvery) up to
// sz.Restarts restart faults, and draws whether the round's role commits
// asynchronously (a crash then loses the last commits, which the
// walsender never sent). A round with a fault that waits for a rebuild
// gets a schema change that rebuilds, late in the workload, so that one
// surely comes. g is the plan's generator, done with the plan's own
// stream: it now draws from the restarts' stream.
func addRestarts(p *Plan, g *gen, sz Size) {
	if sz.Restarts <= 0 || sz.RestartEvery <= 0 {
		return
	}
	r := rand.New(rand.NewPCG(p.Seed^restartStream, p.Round))
	if r.IntN(sz.RestartEvery) != 0 {
		return
	}
	p.AsyncCommit = r.IntN(2) == 0
	kinds := []string{"restart-pg", "crash-pg", "restart-ch", "crash-ch"}
	whens := []string{"", "", "copy", "rebuild"}
	for i := 1 + r.IntN(sz.Restarts); i > 0; i-- {
		f := fault{Kind: kinds[r.IntN(len(kinds))], When: whens[r.IntN(len(whens))]}
		switch {
		case f.When == "copy":
			// The first copy from At on: the initial one, or the one after a
			// restart cut it short (a second copy fault), or a new table's.
			f.At = time.Duration(r.Int64N(int64(time.Second)))
		case f.When == "" && r.IntN(3) == 0:
			f.At = time.Duration(r.Int64N(int64(2 * time.Second))) // around the initial copy
		default:
			f.At = time.Duration(r.Int64N(int64(sz.Span)))
		}
		p.Faults = append(p.Faults, f)
	}
	sort.SliceStable(p.Faults, func(i, j int) bool { return p.Faults[i].At < p.Faults[j].At })
	for _, f := range p.Faults {
		if f.When == "rebuild" {
			g.r = r
			p.Workload = append(p.Workload, g.rebuildDDL(r.IntN(p.Sessions)))
			break
		}
	}
	// Drawn last, so that the draws above stay what they were: a
	// ClickHouse restart without a phase waits, one time in two, for a
	// write in flight.
	for i := range p.Faults {
		if f := &p.Faults[i]; (f.Kind == "restart-ch" || f.Kind == "crash-ch") && f.When == "" && r.IntN(2) == 0 {
			f.When = "write"
		}
	}
}

// rebuildDDL adds a column with a default, which ferry applies by
// rebuilding the ClickHouse table, and inserts rows after it: without DDL
// capture ferry sees the change only with a row of the table.
func (g *gen) rebuildDDL(session int) op {
	t := g.pick()
	for i := 0; t.Key == keyFull && g.avoid["full-ddl"] && i < 10; i++ {
		t = g.pick()
	}
	ct := []string{"int4", "text", "dec10", "ts", "bool"}[g.r.IntN(5)]
	c := column{Name: fmt.Sprintf("add%d_%s", g.nextID+1, ct), Type: ct}
	v := g.value(column{Type: ct}, false)
	for i := 0; v == nil && i < 20; i++ { // DEFAULT NULL changes no row
		v = g.value(column{Type: ct}, false)
	}
	def := typedLit(v, c)
	t.Cols = append(t.Cols, c)
	return g.newOp(session, "add-column-default (rebuild)",
		s("ALTER TABLE "+t.q()+" ADD COLUMN "+quoteIdent(c.Name)+" "+typeByName(ct).sql+" DEFAULT "+def),
		g.insertRows(t, 2, false))
}

// HasRestarts reports whether the plan restarts a server, and so must run
// on private servers.
func (p *Plan) HasRestarts() bool {
	for _, f := range p.Faults {
		if restartKinds[f.Kind] != "" {
			return true
		}
	}
	return false
}

// splitFaults separates the restart faults from the others.
func splitFaults(fs []fault) (others, restarts []fault) {
	for _, f := range fs {
		if restartKinds[f.Kind] != "" {
			restarts = append(restarts, f)
		} else {
			others = append(others, f)
		}
	}
	return others, restarts
}

// privateFor is the servers a plan runs on: srv itself, or its private
// pair for a plan with restart faults (started up again if a failed round
// left one down).
func privateFor(srv Servers, p *Plan) (Servers, error) {
	if !p.HasRestarts() {
		return srv, nil
	}
	if srv.Private == nil {
		return srv, fmt.Errorf("seed %d round %d restarts servers, and no private servers were given (Servers.Private): the shared stack is never restarted", p.Seed, p.Round)
	}
	if err := srv.Private.ensureUp(); err != nil {
		return srv, err
	}
	return srv.Private.Servers(srv), nil
}

// restarter fires a round's restart faults, each at its offset or at the
// phase it waits for, and keeps the log of what it did. Unlike the other
// faults, a restart fault still fires after the sessions end (a shrunk
// plan's workload is shorter than its schedule), so that the schedule a
// reproduction shows is the one it runs.
type restarter struct {
	e    *env
	pv   *Private
	sup  *supervisor
	chp  *testkit.Proxy // ferry's ClickHouse connections
	logf Logf
	mu   sync.Mutex
	evs  []string
	n    int
	// restarts that landed in the phase they waited for
	inPhase int
	// the ferry output scanned so far
	proc     *proc
	off      int
	finished chan struct{}
}

// startRestarter fires fs (restart faults) from its own goroutine, with
// a finer clock than the other faults' so that a phase's start is caught.
func startRestarter(ctx context.Context, e *env, sup *supervisor, chp *testkit.Proxy, fs []fault, t0 time.Time, sessions <-chan struct{}, logf Logf) *restarter {
	rs := &restarter{e: e, pv: e.srv.Private, sup: sup, chp: chp, logf: logf, finished: make(chan struct{})}
	go func() {
		defer close(rs.finished)
		rs.run(ctx, fs, t0, sessions)
	}()
	return rs
}

// wait waits, once the sessions are done, for the faults still to fire,
// restarting a ferry that exits meanwhile, and returns how many fired.
func (rs *restarter) wait() int {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-rs.finished:
			rs.mu.Lock()
			defer rs.mu.Unlock()
			return rs.n
		case <-tick.C:
			rs.sup.checkExit()
		}
	}
}

// run fires fs in order; it returns when all have fired and the servers
// are up again, or when ctx ends.
func (rs *restarter) run(ctx context.Context, fs []fault, t0 time.Time, done <-chan struct{}) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var sessionsDone, lastPoll time.Time
	var lastSent int64
	var target string // the WAL position at the workload's end
	caughtUp := false
	for len(fs) > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-done:
			sessionsDone, done = time.Now(), nil
		case <-tick.C:
		}
		if !sessionsDone.IsZero() && !caughtUp && time.Since(lastPoll) > 500*time.Millisecond {
			lastPoll = time.Now()
			if target == "" {
				target = rs.e.walPosition(ctx)
			} else {
				caughtUp = rs.e.slotPast(ctx, target)
			}
		}
		text := rs.newOutput()
		sent := rs.chp.Forwarded()
		burst := sent-lastSent >= writeBurst
		lastSent = sent
		f := fs[0]
		if time.Since(t0) < f.At {
			continue
		}
		note := ""
		if f.When != "" {
			marks := phaseMarks[f.When]
			i := indexAny(text, marks.begin)
			switch {
			case f.When == "write" && burst:
				note = " (during a write)"
			case i >= 0 && indexAny(text[i:], marks.end) >= 0:
				note = " (the " + f.When + " had already ended when the log was read)"
			case i >= 0:
				note = " (during the " + f.When + ")"
			case caughtUp || !sessionsDone.IsZero() && time.Since(sessionsDone) > phaseGrace:
				// Not before ferry has had the workload's last changes.
				note = " (no " + f.When + " began after its offset: fired once ferry had the workload)"
			default:
				continue
			}
		}
		rs.fire(f, time.Since(t0), note)
		fs = fs[1:]
	}
}

// newOutput is the ferry output written since the last call (from the
// current process; a restarted ferry's output starts anew).
func (rs *restarter) newOutput() string {
	rs.sup.mu.Lock()
	p := rs.sup.p
	rs.sup.mu.Unlock()
	if p != rs.proc {
		rs.proc, rs.off = p, 0
	}
	text, n := p.out.From(rs.off)
	rs.off = n
	return text
}

func indexAny(s string, subs []string) int {
	best := -1
	for _, sub := range subs {
		if i := strings.Index(s, sub); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

func (rs *restarter) fire(f fault, at time.Duration, note string) {
	rs.logf("  fault at %s: %s%s", at.Round(time.Millisecond), f.label(), note)
	start := time.Now()
	var err error
	switch f.Kind {
	case "restart-pg":
		err = rs.pv.pg.restart("fast")
	case "crash-pg":
		err = rs.pv.pg.restart("immediate")
	case "restart-ch":
		err = rs.pv.ch.restart(false)
	case "crash-ch":
		err = rs.pv.ch.restart(true)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.n++
	if strings.HasPrefix(note, " (during") {
		rs.inPhase++
	}
	ev := fmt.Sprintf("%s at %s%s: down for %s", f.label(), at.Round(time.Millisecond), note, time.Since(start).Round(time.Millisecond))
	if err != nil {
		ev += ": " + err.Error()
	}
	rs.evs = append(rs.evs, ev)
}

// counts are the restarts fired and those that landed in their phase.
func (rs *restarter) counts() (n, inPhase int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.n, rs.inPhase
}

func (rs *restarter) events() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string(nil), rs.evs...)
}

// label is the fault as the schedule shows it.
func (f fault) label() string {
	switch {
	case f.When != "":
		return f.Kind + " at the next " + f.When
	case f.Of != "":
		return f.Kind + " of ferry " + f.Of
	}
	return f.Kind
}

// reconnectAfter gives a session a new connection when a restart ended
// its own; nil when it could not (the session then ends).
func reconnectAfter(ctx context.Context, conn *pgx.Conn, url string) *pgx.Conn {
	if !conn.IsClosed() {
		return conn
	}
	c, err := connectRetry(ctx, url, 3*time.Minute)
	if err != nil {
		return nil
	}
	_, _ = c.Exec(ctx, "SET lock_timeout = '10s'")
	return c
}

// reopen replaces the round's own connections, which a restart may have
// ended, before the checks.
func (e *env) reopen(ctx context.Context) error {
	if e.pg != nil {
		e.pg.Close(ctx)
	}
	var err error
	if e.pg, err = connectRetry(ctx, e.roleURL, 3*time.Minute); err != nil {
		return err
	}
	if e.ch != nil {
		e.ch.Close()
	}
	opts, err := ch.ParseDSN(e.srv.CH)
	if err != nil {
		return err
	}
	opts.ReadTimeout = 5 * time.Minute
	e.ch, err = ch.Open(opts)
	return err
}

// asyncCommit makes the round's role commit without waiting for its WAL
// to reach the disk: a PostgreSQL crash then loses the last commits, which
// ferry must never have seen (the walsender sends only flushed WAL).
func (e *env) asyncCommit(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, e.srv.PG)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "ALTER ROLE "+e.name+" SET synchronous_commit = off")
	return err
}

// walPosition is PostgreSQL's WAL insert position, "" when it cannot be
// read (a restart under way).
func (e *env) walPosition(ctx context.Context) string {
	var lsn string
	if err := e.pg.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		if e.pg.IsClosed() {
			_ = e.reopen(ctx)
		}
		return ""
	}
	return lsn
}

// slotPast reports whether the round's slot has confirmed lsn.
func (e *env) slotPast(ctx context.Context, lsn string) bool {
	var past bool
	err := e.pg.QueryRow(ctx, "SELECT coalesce(confirmed_flush_lsn >= $1::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = $2", lsn, e.name).Scan(&past)
	if err != nil && e.pg.IsClosed() {
		_ = e.reopen(ctx)
	}
	return past
}
