package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// Result is what one round did and found.
type Result struct {
	Ops, OpErrors int // operations run, and those PostgreSQL refused (rolled back)
	Faults        int
	// Restarts are the server restarts among the faults, and those that
	// landed in the phase (a copy, a rebuild) they waited for.
	Restarts, RestartsInPhase int
	RowsChecked               uint64
	// Replayed are rows ClickHouse stores twice under one key and version
	// (a write replayed after a fault), which FINAL collapses.
	Replayed uint64
	Tables   int
	// Disagreements are the findings: a table that differs, a validator
	// that disagrees with ferry verify, a catch-up that fails.
	Disagreements []string
	Events        []string // ferry exits on its own, and other things worth a look
	// Refusals counts PostgreSQL's errors by message: a generator whose
	// statements mostly fail tests little.
	Refusals map[string]int
	Elapsed  time.Duration
	Kafka    bool   // the round went through Kafka
	logs     string // every ferry run's (and ferry load's) output, for a failing round's directory
}

// Failed reports whether the round found something.
func (r *Result) Failed() bool { return len(r.Disagreements) > 0 }

// Kind is the main sort of the round's first finding, the one the
// shrinker keeps: a failed catch-up, rows missing, deleted rows visible,
// a missing column, rows that differ, or verify against the fingerprint.
func (r *Result) Kind() string {
	all := strings.Join(r.Disagreements, "\n")
	for _, k := range []string{"catch-up failed", "missing in ClickHouse", "visible in ClickHouse", "no ClickHouse table", "rows differ", "fingerprint", "verify"} {
		if strings.Contains(all, k) {
			return k
		}
	}
	return ""
}

// Logf receives progress lines.
type Logf func(format string, args ...any)

// Run runs one plan against the servers and validates the result.
func Run(ctx context.Context, srv Servers, p *Plan, logf Logf) (*Result, error) {
	start := time.Now()
	srv, err := privateFor(srv, p)
	if err != nil {
		return nil, err
	}
	e, err := newEnv(ctx, srv)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if p.Kafka {
		if err := e.startKafka(); err != nil {
			return nil, err
		}
	}
	if p.AsyncCommit {
		if err := e.asyncCommit(ctx); err != nil {
			return nil, err
		}
	}
	res := &Result{Refusals: map[string]int{}, Kafka: p.Kafka}
	var mu sync.Mutex
	refused := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.OpErrors++
		msg := err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		msg = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return '#'
			}
			return r
		}, msg)
		res.Refusals[cut(msg)]++
	}
	for _, q := range p.Schema {
		if _, err := e.pg.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("schema: %s: %w", q, err)
		}
	}
	for _, o := range p.Preload {
		res.Ops++
		if err := runOp(ctx, e.pg, o); err != nil {
			refused(err)
		}
	}
	if p.Setup {
		if out, err := runFerry(ctx, srv.Ferry, 2*time.Minute, "setup", "--pg", e.adminURL); err != nil {
			return nil, fmt.Errorf("ferry setup: %v\n%s", err, out)
		}
	}
	if err := e.stream(ctx, p, res, refused, logf); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if p.HasRestarts() {
		if err := e.reopen(ctx); err != nil {
			return nil, fmt.Errorf("reconnect after the restarts: %w", err)
		}
	}
	catchUp := [][]string{append([]string{"run", "--catch-up"}, e.runArgs(p, e.roleURL, srv.CH)...)}
	if p.Kafka {
		// The publisher first: the loader's catch-up ends at the topics'
		// ends as of its start.
		catchUp = append(catchUp, append(e.loadArgs(srv.CH), "--catch-up"))
	}
	for _, args := range catchUp {
		what := "ferry " + args[0] + " --catch-up"
		out, err := runFerry(ctx, srv.Ferry, 5*time.Minute, args...)
		res.logs += "\n--- " + what + " ---\n" + out
		if err != nil {
			res.Disagreements = append(res.Disagreements, fmt.Sprintf("%s failed: %v\n%s", what, err, tail(out, 15)))
			res.Elapsed = time.Since(start)
			return res, nil
		}
	}
	if err := e.validate(ctx, p, res); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// runArgs are ferry run's flags for the round (connection URLs given; a
// Kafka round's ferry run publishes to its broker and needs no ClickHouse).
func (e *env) runArgs(p *Plan, pgURL, chURL string) []string {
	a := []string{"--pg", pgURL, "--slot", e.name, "--metrics-addr", "",
		"--batch-age", "100ms", "--streaming", p.Streaming, "--copy-workers", fmt.Sprint(p.CopyWorkers)}
	if p.Kafka {
		a = append(a, e.kafkaArgs()...)
	} else {
		a = append(a, "--ch", chURL)
	}
	if p.CopyText {
		a = append(a, "--copy-text")
	}
	if len(p.TextColumns) > 0 {
		a = append(a, "--text-columns", strings.Join(p.TextColumns, ","))
	}
	if len(p.AppendOnly) > 0 {
		a = append(a, "--append-only", strings.Join(p.AppendOnly, ","))
	}
	return a
}

// verifyArgs are ferry verify's flags for the round.
func (e *env) verifyArgs(p *Plan) []string {
	a := []string{"--pg", e.roleURL, "--ch", e.srv.CH, "--slot", e.name}
	if len(p.TextColumns) > 0 {
		a = append(a, "--text-columns", strings.Join(p.TextColumns, ","))
	}
	if len(p.AppendOnly) > 0 {
		a = append(a, "--append-only", strings.Join(p.AppendOnly, ","))
	}
	return a
}

// stream starts ferry through the proxies (in a Kafka round ferry run
// through the PostgreSQL one, ferry load through the ClickHouse one), runs
// the sessions and the fault schedule at once, and stops ferry when the
// sessions are done.
func (e *env) stream(ctx context.Context, p *Plan, res *Result, refused func(error), logf Logf) error {
	pgp, err := testkit.StartProxy(hostPort(e.srv.PG))
	if err != nil {
		return err
	}
	defer pgp.Close()
	chp, err := testkit.StartProxy(hostPort(e.srv.CH))
	if err != nil {
		return err
	}
	defer chp.Close()
	args := append([]string{"run"}, e.runArgs(p, viaProxy(e.roleURL, pgp.Addr()), viaProxy(e.srv.CH, chp.Addr()))...)
	sup := &supervisor{name: "ferry run", bin: e.srv.Ferry, args: args, logf: logf}
	sups := []*supervisor{sup}
	if p.Kafka {
		sups = append(sups, &supervisor{name: "ferry load", bin: e.srv.Ferry, args: e.loadArgs(viaProxy(e.srv.CH, chp.Addr())), logf: logf})
	}
	for _, s := range sups {
		if err := s.start(); err != nil {
			for _, started := range sups {
				if started.p != nil {
					started.p.kill()
				}
			}
			return err
		}
	}
	t0 := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var ops atomic.Int64
	for s := 0; s < p.Sessions; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			n := e.session(ctx, p, s, refused)
			ops.Add(int64(n))
		}(s)
	}
	go func() { wg.Wait(); close(done) }()
	others, restarts := splitFaults(p.Faults)
	rs := startRestarter(ctx, e, sup, chp, restarts, t0, done, logf)
	res.Faults += injectFaults(ctx, sups, others, t0, done, pgp, chp)
	<-done
	res.Faults += rs.wait()
	res.Restarts, res.RestartsInPhase = rs.counts()
	res.Events = append(res.Events, rs.events()...)
	res.Ops += int(ops.Load())
	pgp.Reset()
	chp.Reset()
	// Let ferry stream the tail through the proxies before it stops, so
	// that SIGTERM's flush path is the one that ends the stream.
	time.Sleep(time.Second)
	// ferry run first, so that ferry load's SIGTERM comes after the last
	// events were published.
	var logs []string
	for _, s := range sups {
		res.Events = append(res.Events, s.stop()...)
		logs = append(logs, strings.Join(append(s.outs, s.p.out.String()), "\n--- the next "+s.name+" ---\n"))
	}
	res.logs = strings.Join(logs, "\n--- ferry load ---\n")
	res.Events = append(res.Events, streamFormats(res.logs))
	if n := strings.Count(res.logs, "resync: the stream goes on while the copy runs"); n > 0 {
		res.Events = append(res.Events, fmt.Sprintf("resync: %d copies began beside the stream, %d resyncs done", n, strings.Count(res.logs, "resync done")))
	}
	return nil
}

// session runs session s's operations in order, with small pauses.
func (e *env) session(ctx context.Context, p *Plan, s int, refused func(error)) (n int) {
	conn, err := connectRetry(ctx, e.roleURL, 3*time.Minute)
	if err != nil {
		return 0
	}
	defer func() { conn.Close(ctx) }()
	// Lock waits between sessions end in a deadlock error, not a hang.
	_, _ = conn.Exec(ctx, "SET lock_timeout = '10s'")
	r := rand.New(rand.NewPCG(p.Seed, p.Round*1000+uint64(s)))
	for _, o := range p.Workload {
		if o.Session != s || ctx.Err() != nil {
			continue
		}
		n++
		if err := runOp(ctx, conn, o); err != nil {
			refused(err)
			c := reconnectAfter(ctx, conn, e.roleURL)
			if c == nil {
				return n
			}
			conn = c
		}
		time.Sleep(time.Duration(r.IntN(40)) * time.Millisecond)
	}
	return n
}

// runOp runs one operation; a statement PostgreSQL refuses rolls the
// transaction back (that is part of the workload, not a failure).
func runOp(ctx context.Context, conn *pgx.Conn, o op) error {
	for _, st := range o.Stmts {
		var err error
		if st.Copy != "" {
			_, err = conn.PgConn().CopyFrom(ctx, strings.NewReader(st.Copy), st.SQL)
		} else {
			_, err = conn.Exec(ctx, st.SQL)
		}
		if err != nil {
			_, _ = conn.Exec(ctx, "ROLLBACK")
			return fmt.Errorf("op %d: %s: %w", o.ID, firstLine(st.SQL), err)
		}
	}
	return nil
}

func firstLine(s string) string {
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// supervisor keeps one ferry process going (ferry run, or a Kafka
// round's ferry load), restarting it after faults and after exits of its
// own (which it records).
type supervisor struct {
	name   string // "ferry run" or "ferry load"
	bin    string
	args   []string
	logf   Logf
	mu     sync.Mutex
	p      *proc
	events []string
	outs   []string
}

func (s *supervisor) start() error {
	p, err := startFerry(s.bin, s.args)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.p != nil {
		s.outs = append(s.outs, s.p.out.String())
	}
	s.p = p
	s.mu.Unlock()
	return nil
}

// checkExit restarts a ferry that exited without being told to.
func (s *supervisor) checkExit() {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p.running() {
		return
	}
	ev := fmt.Sprintf("%s exited on its own (%v): %s", s.name, p.err, tail(p.out.String(), 3))
	s.events = append(s.events, ev)
	if len(s.events) > 20 {
		return
	}
	time.Sleep(500 * time.Millisecond)
	if err := s.start(); err != nil {
		s.events = append(s.events, "restart: "+err.Error())
	}
}

// injectFaults injects the schedule until done, restarting the processes
// of sups (ferry run first) that exit meanwhile, and returns how many
// faults it injected.
func injectFaults(ctx context.Context, sups []*supervisor, fs []fault, t0 time.Time, done <-chan struct{}, pgp, chp *testkit.Proxy) int {
	n := 0
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return n
		case <-ctx.Done():
			<-done // the sessions end on the context too
			return n
		case <-tick.C:
		}
		for _, s := range sups {
			s.checkExit()
		}
		for len(fs) > 0 && time.Since(t0) >= fs[0].At {
			s := sups[0]
			if fs[0].Of == "load" && len(sups) > 1 {
				s = sups[1]
			}
			s.inject(fs[0], pgp, chp)
			fs = fs[1:]
			n++
		}
	}
}

func (s *supervisor) inject(f fault, pgp, chp *testkit.Proxy) {
	s.logf("  fault at %s: %s", f.At.Round(time.Millisecond), f.label())
	switch f.Kind {
	case "kill9", "sigterm":
		s.mu.Lock()
		p := s.p
		s.mu.Unlock()
		if f.Kind == "kill9" {
			p.kill()
		} else if err := p.term(90 * time.Second); err != nil && !errors.Is(err, context.Canceled) {
			s.events = append(s.events, fmt.Sprintf("sigterm: %s exited with %v: %s", s.name, err, tail(p.out.String(), 3)))
		}
		if err := s.start(); err != nil {
			s.events = append(s.events, "restart: "+err.Error())
		}
	case "cut-pg":
		pgp.Drop()
	case "cut-ch":
		chp.Drop()
	case "stall-ch":
		chp.Stall()
		time.Sleep(3 * time.Second)
		chp.Unstall()
	}
}

// stop ends the last process with SIGTERM and returns the events.
func (s *supervisor) stop() []string {
	s.checkExit()
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if err := p.term(90 * time.Second); err != nil {
		s.events = append(s.events, fmt.Sprintf("final sigterm of %s: %v: %s", s.name, err, tail(p.out.String(), 5)))
	}
	return s.events
}

// streamFormats counts ferry's streams by the format of their values, from
// its "streaming" log lines, and the restarts in text.
func streamFormats(logs string) string {
	binary, text := 0, 0
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, "\tstreaming\t") {
			continue
		}
		if strings.Contains(line, `"format": "binary"`) {
			binary++
		} else {
			text++
		}
	}
	return fmt.Sprintf("streams: %d in binary format, %d in text; %d started again in text", binary, text,
		strings.Count(logs, "starting again in text format"))
}
