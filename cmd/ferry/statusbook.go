package main

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferry-cdc/ferry/replicator"
)

// statusBook keeps, per table, what the status page shows: the rows each
// copy of the table made, the changes streamed, and when the last of them
// was written. The observer feeds it from the replicator's goroutine (the
// copy workers too); the page reads it. Everything is this process's: a
// restart starts the counts at zero, as /metrics does.
type statusBook struct {
	mu      sync.Mutex
	tables  map[string]*tableBook
	listed  bool         // the replicator told which tables it replicates
	pending []*tableBook // tables with changes not yet known written
}

// tableBook is one table's entry.
type tableBook struct {
	table       replicator.ReplicatedTable
	replicated  bool // among the tables last listed (or none listed yet)
	ops         [4]uint64
	pending     bool
	lastApplied time.Time
	copy        *copyBook
}

// opIndex orders the ops of ferry_changes_total.
var opIndex = map[string]int{"insert": 0, "update": 1, "delete": 2, "truncate": 3}

// copyBook is the latest copy of a table, the initial copy's or a later
// one's (a table that joined, a rebuild after a schema change): every copy
// reports through Observer.SnapshotProgress, so a future per-table resync,
// which is a copy too, lands here without a place of its own.
type copyBook struct {
	rows, estimate    uint64
	done              bool
	started, finished time.Time
	copies            int // copies of the table this process began
}

func newStatusBook() *statusBook { return &statusBook{tables: map[string]*tableBook{}} }

// entry returns the table's entry, making it; b.mu is held.
func (b *statusBook) entry(table string) *tableBook {
	t := b.tables[table]
	if t == nil {
		schema, name, _ := strings.Cut(table, ".")
		t = &tableBook{table: replicator.ReplicatedTable{Table: table, Schema: schema, Name: name}, replicated: !b.listed}
		b.tables[table] = t
	}
	return t
}

func (b *statusBook) setTables(tables []replicator.ReplicatedTable) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.listed = true
	for _, t := range b.tables {
		t.replicated = false
	}
	for _, rt := range tables {
		t := b.entry(rt.Table)
		t.table, t.replicated = rt, true
	}
}

func (b *statusBook) change(table, op string) { b.counter(table, op)() }

// counter is change for one table and op, whose entry (never removed) is
// looked up once.
func (b *statusBook) counter(table, op string) func() {
	b.mu.Lock()
	t := b.entry(table)
	b.mu.Unlock()
	i, known := opIndex[op]
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if known {
			t.ops[i]++
		}
		if !t.pending {
			t.pending = true
			b.pending = append(b.pending, t)
		}
	}
}

// written marks every change counted so far as written to the sink: the
// stream reports a flush only after the batch holding them is stored, and
// confirms a position only with nothing left in memory.
func (b *statusBook) written(at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.pending {
		t.pending, t.lastApplied = false, at
	}
	b.pending = b.pending[:0]
}

func (b *statusBook) copyProgress(table string, rows, total uint64, done bool, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.entry(table)
	c := t.copy
	// A copy after a finished one, or one started over (rows back to 0
	// after a lost connection), is a new copy.
	if c == nil || (c.done && !done) || rows < c.rows {
		n := 0
		if c != nil {
			n = c.copies
		}
		c = &copyBook{started: at, copies: n + 1}
		t.copy = c
	}
	c.rows, c.estimate = rows, total
	if done && !c.done {
		c.done, c.finished = true, at
	}
}

// snapshot returns the tables' entries as the page shows them, sorted by
// name: the replicated tables first, then those no longer replicated.
func (b *statusBook) snapshot() []pageTable {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]pageTable, 0, len(b.tables))
	for _, t := range b.tables {
		p := pageTable{Table: t.table.Table, Schema: t.table.Schema, Name: t.table.Name,
			Destination: t.table.Destination, AppendOnly: t.table.AppendOnly, Replicated: t.replicated,
			Streamed:    pageOps{Insert: t.ops[0], Update: t.ops[1], Delete: t.ops[2], Truncate: t.ops[3]},
			LastApplied: timePtr(t.lastApplied)}
		if c := t.copy; c != nil {
			p.Copy = &pageCopy{Rows: c.rows, Estimate: c.estimate, Done: c.done, Started: timePtr(c.started),
				Finished: timePtr(c.finished), Copies: c.copies}
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b pageTable) int {
		if a.Replicated != b.Replicated {
			if a.Replicated {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Table, b.Table)
	})
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
