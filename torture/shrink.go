package torture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Shrink cuts a failing plan down: it removes chunks of operations and
// faults (halves, then quarters, ... as delta debugging does) and keeps a
// cut whenever the smaller plan still fails. It stops at the budget and
// returns the smallest failing plan found, and how many re-runs it made.
// Rounds are concurrent and faults are timed, so a cut that passes once
// may fail on another run: the result is small, not proven minimal.
func Shrink(ctx context.Context, srv Servers, p *Plan, budget time.Duration, logf Logf) (*Plan, int) {
	deadline := time.Now().Add(budget)
	best := p
	runs := 0
	want := ""
	fails := func(c *Plan) bool {
		runs++
		res, err := Run(ctx, srv, c, func(string, ...any) {})
		if err != nil {
			logf("  shrink run: %v", err)
			return false
		}
		if want == "" {
			want = res.Kind()
		}
		// A cut that fails otherwise has found another bug, not this one.
		return res.Failed() && res.Kind() == want
	}
	// The whole plan first: a failure that timing made does not come back.
	if !fails(p) {
		logf("  shrink: the plan passes when run again; not shrunk")
		return p, runs
	}
	for n := 2; time.Now().Before(deadline) && ctx.Err() == nil; {
		items := best.OpCount()
		if items <= 1 {
			break
		}
		chunk := (items + n - 1) / n
		cut := false
		for start := 0; start < items && time.Now().Before(deadline); start += chunk {
			c := best.without(start, min(start+chunk, items))
			if fails(c) {
				logf("  shrink: %d -> %d operations still fail", best.OpCount(), c.OpCount())
				best, cut = c, true
				n = max(n-1, 2)
				break
			}
		}
		if !cut {
			if chunk == 1 {
				break
			}
			n = min(2*n, items)
		}
	}
	return best, runs
}

// without is a copy of the plan lacking items [lo, hi) of the sequence
// preload, workload, faults. The first preload ops (one COPY per table)
// are items like any other.
func (p *Plan) without(lo, hi int) *Plan {
	c := *p
	i := 0
	keep := func() bool { ok := i < lo || i >= hi; i++; return ok }
	c.Preload = nil
	for _, o := range p.Preload {
		if keep() {
			c.Preload = append(c.Preload, o)
		}
	}
	c.Workload = nil
	for _, o := range p.Workload {
		if keep() {
			c.Workload = append(c.Workload, o)
		}
	}
	c.Faults = nil
	for _, f := range p.Faults {
		// Restart faults are kept, and take no index (OpCount).
		if restartKinds[f.Kind] != "" || keep() {
			c.Faults = append(c.Faults, f)
		}
	}
	return &c
}

// Save writes a failing round's plan, its findings and, when there is
// one, the shrunk plan into dir/seed<seed>-round<round>-<ch>, and returns
// that directory.
func Save(dir string, p, shrunk *Plan, res *Result) (string, error) {
	d := filepath.Join(dir, fmt.Sprintf("seed%d-round%d-%s", p.Seed, p.Round, chName(p.Legacy)))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	files := map[string]string{
		"plan.sql":     p.Script(),
		"findings.txt": strings.Join(res.Disagreements, "\n\n") + "\n\nevents:\n" + strings.Join(res.Events, "\n") + "\n",
		"ferry.log":    res.logs,
	}
	if shrunk != nil {
		files["shrunk.sql"] = shrunk.Script()
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return d, nil
}

func chName(legacy bool) string {
	if legacy {
		return "legacy"
	}
	return "modern"
}
