package torture

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// fault is one fault on the ferry subprocess, at an offset from its first
// start (small offsets land in the initial copy).
type fault struct {
	At   time.Duration
	Kind string // kill9, sigterm, cut-pg, cut-ch, stall-ch, or a restart (restartKinds)
	When string // a restart's phase: at the first "copy", "rebuild" or "write" from At on ("": at At)
	// Of is the process a kill9 or sigterm of a Kafka round hits: "run"
	// (ferry run --sink kafka) or "load" (ferry load --from-kafka); ""
	// on the direct path, where ferry run is the only one.
	Of string
}

// Plan is everything a round does, generated from (seed, round) alone:
// the reproduction that a failure saves and the shrinker cuts down.
type Plan struct {
	Seed, Round uint64
	Legacy      bool
	Setup       bool   // ferry setup (DDL capture) before the first start
	Streaming   string // ferry run --streaming
	CopyWorkers int
	CopyText    bool // ferry run --copy-text (a round in four, from a stream of its own)
	// BinaryTypes: the tables are made of types ferry reads in binary form
	// only, so that the stream is in pgoutput's binary format (a round in
	// two, from a stream of its own; columns added later may be any).
	BinaryTypes bool
	Sessions    int
	Schema      []string // CREATE statements
	TextColumns []string
	AppendOnly  []string
	Preload     []op // before ferry's first start: what the initial copy reads
	Workload    []op // concurrent, by session, while ferry runs
	Faults      []fault
	// StrictReplays: see Size.
	StrictReplays bool
	AsyncCommit   bool // the role commits with synchronous_commit = off (restart rounds only)
	// Kafka rounds go through Kafka (kafka.go): ferry run --sink kafka
	// into an in-process broker, ferry load --from-kafka into ClickHouse.
	Kafka bool
}

// Size is how big a round is.
type Size struct {
	Tables   int // at most
	Preload  int // transactions before the start
	Workload int // transactions while ferry runs
	Faults   int // at most
	Span     time.Duration
	// Avoid names known ferry bugs, not yet fixed on main, that the
	// generator steers clear of so that a run can find others (see known).
	Avoid []string
	// Restarts is the most restart faults a round has (one round in
	// RestartEvery has them); 0: none. They run on private servers.
	Restarts, RestartEvery int
	// StrictReplays makes two stored rows of one key and version that
	// differ a disagreement; otherwise an event (FINAL shows the later
	// write, so the fingerprint may still agree).
	StrictReplays bool
	// KafkaEvery: one round in KafkaEvery goes through Kafka (1: every
	// round; 0: none). A Kafka round has no server restarts.
	KafkaEvery int
	// PublicationEvery: one round in PublicationEvery drops tables from
	// ferry's publication under load and adds most back (publication.go;
	// 0: none).
	PublicationEvery int
	// ResyncEvery: one round in ResyncEvery asks for resyncs of tables
	// under load (resync.go; 0: none).
	ResyncEvery int
}

// Known are the bugs Size.Avoid may name.
var Known = map[string]string{
	"past2262":           "timestamps after 2262-04-11 are stored wrapped on ClickHouse >= 22.8 (clickhouse-go carries DateTime64 as UnixNano; fixed, 02fa690)",
	"append-copy":        "rows of one COPY into an append-only table share a WAL position and all but one are lost (fixed, a66094d)",
	"append-rebuild":     "a rebuild (a column added with a default; a rename on ClickHouse < 20.4) of an append-only table doubles or loses the rows of the transaction that caused it (fixed, c13f8b8)",
	"full-ddl":           "after ADD or DROP COLUMN on a REPLICA IDENTITY FULL table without a key, an UPDATE or DELETE of an older row leaves that row visible in ClickHouse (its row key is hashed over the new columns; fixed: such a change rebuilds the table)",
	"partition-truncate": "TRUNCATE of one partition of a table published through its root leaves the partition's rows in ClickHouse; ferry now stops with an error naming the resync, which a round counts as a failure",
	"partition-ddl":      "detach, attach and drop of partitions, generated only with ferry setup; several stop ferry by design (see docs/LIMITATIONS.md): named to leave them out",
	"publication":        "ALTER PUBLICATION ... DROP TABLE and ADD TABLE under load: a table added back lost every change made while it was out (fixed, d651365); an update that left a TOASTed column unchanged, of a row inserted while out, stopped ferry before the table's copy (fixed, dd75cae); named to leave them out",
	"date-key-toast":     "the lookup of unchanged TOAST values fails on a table keyed by a date on ClickHouse >= 22.8 (Date32 IN toDateTime64(...): type mismatch; fixed)",
}

// apart is a number drawn from (seed, round) apart from the round's
// generator. A PCG seeded with consecutive rounds as its sequence gives
// first draws that run alike for many rounds (a coin of seed 846751 fell
// the same way in rounds 0-4 and 13-19); splitmix64's finalizer, applied
// twice, mixes every bit of both.
func apart(seed, round uint64) uint64 {
	mix := func(x uint64) uint64 {
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		return x ^ x>>31
	}
	return mix(mix(seed) + round)
}

// NewPlan generates round `round` of seed `seed`.
func NewPlan(seed, round uint64, legacy bool, sz Size) *Plan {
	r := rand.New(rand.NewPCG(seed, round))
	p := &Plan{Seed: seed, Round: round, Legacy: legacy, Setup: r.IntN(2) == 0,
		Streaming: []string{"auto", "on", "off"}[r.IntN(3)], CopyWorkers: 1 + r.IntN(3), Sessions: 2 + r.IntN(3)}
	// Drawn apart so that adding it left every other draw of a seed as it was.
	p.CopyText = rand.New(rand.NewPCG(seed^0x636f70797465787, round)).IntN(4) == 0
	p.BinaryTypes = apart(seed^0x62696e61727974, round)%2 == 0
	g := &gen{r: r, legacy: legacy, setup: p.Setup, avoid: map[string]bool{}, binaryTypes: p.BinaryTypes}
	for _, k := range sz.Avoid {
		// The first two are bugs of ClickHouse >= 22.8's types only.
		g.avoid[k] = !legacy || k != "past2262" && k != "date-key-toast"
	}
	p.Schema = []string{`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'très "bien"')`}
	nt := 2 + r.IntN(max(1, sz.Tables-1))
	for i := 0; i < nt; i++ {
		t := g.genTable(i)
		g.tables = append(g.tables, t)
		p.Schema = append(p.Schema, t.createSQL()...)
		if t.Key == keyAppend {
			p.AppendOnly = append(p.AppendOnly, "public."+t.Name)
		}
		for _, c := range t.Cols {
			if !legacy && typeByName(c.Type).textOnModern {
				p.TextColumns = append(p.TextColumns, "public."+t.Name+"."+c.Name)
			}
		}
	}
	for _, t := range g.tables {
		p.Preload = append(p.Preload, g.newOp(0, "preload", g.copyRows(t, 10+r.IntN(60))))
	}
	for i := 0; i < sz.Preload; i++ {
		p.Preload = append(p.Preload, g.txn(0))
	}
	firstTables := len(g.tables)
	for i := 0; i < sz.Workload; i++ {
		sess := r.IntN(p.Sessions)
		switch n := r.IntN(100); {
		case n < 6:
			p.Workload = append(p.Workload, g.ddl(sess))
		case n < 9:
			if o, ok := g.truncate(sess); ok {
				p.Workload = append(p.Workload, o)
			}
		case n < 14:
			p.Workload = append(p.Workload, g.bigTxn(sess))
		default:
			p.Workload = append(p.Workload, g.txn(sess))
		}
	}
	kinds := []string{"kill9", "kill9", "sigterm", "cut-pg", "cut-ch", "stall-ch"}
	for i, n := 0, 1+r.IntN(max(1, sz.Faults)); i < n; i++ {
		at := time.Duration(r.Int64N(int64(sz.Span)))
		if i == 0 && r.IntN(2) == 0 {
			at = time.Duration(r.Int64N(int64(2 * time.Second))) // in the initial copy
		}
		p.Faults = append(p.Faults, fault{At: at, Kind: kinds[r.IntN(len(kinds))]})
	}
	sort.Slice(p.Faults, func(i, j int) bool { return p.Faults[i].At < p.Faults[j].At })
	addKafka(p, sz)
	if !p.Kafka {
		addRestarts(p, g, sz)
	}
	addPublicationChanges(p, g, sz, firstTables)
	addResyncs(p, g, sz, firstTables)
	p.StrictReplays = sz.StrictReplays
	return p
}

// OpCount is the number of operations the shrinker may cut, faults
// included; restart faults are not among them (the shrinker keeps them).
func (p *Plan) OpCount() int {
	_, restarts := splitFaults(p.Faults)
	return len(p.Preload) + len(p.Workload) + len(p.Faults) - len(restarts)
}

// Script is the plan as a psql script plus the fault schedule: the
// reproduction a failure leaves behind.
func (p *Plan) Script() string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- ferry torture: seed %d round %d, ClickHouse %s\n", p.Seed, p.Round, map[bool]string{true: "legacy (< 22.8)", false: "modern"}[p.Legacy])
	fmt.Fprintf(&b, "-- ferry run flags: --streaming %s --copy-workers %d", p.Streaming, p.CopyWorkers)
	if p.CopyText {
		b.WriteString(" --copy-text")
	}
	if len(p.TextColumns) > 0 {
		fmt.Fprintf(&b, " --text-columns %q", strings.Join(p.TextColumns, ","))
	}
	if len(p.AppendOnly) > 0 {
		fmt.Fprintf(&b, " --append-only %q", strings.Join(p.AppendOnly, ","))
	}
	fmt.Fprintf(&b, "\n-- ferry setup (DDL capture): %v; sessions: %d; tables of binary-read types only: %v\n", p.Setup, p.Sessions, p.BinaryTypes)
	if p.HasRestarts() {
		fmt.Fprintf(&b, "-- restarts servers: runs on a private PostgreSQL and ClickHouse; the role's synchronous_commit off: %v\n", p.AsyncCommit)
	}
	if p.Kafka {
		b.WriteString("-- through Kafka: ferry run --sink kafka into an in-process broker (kfake), ferry load --from-kafka into ClickHouse (replay with -torture.kafka always)\n")
	}
	b.WriteString("-- the role runs with logical_decoding_work_mem = 64kB\n\n-- schema\n")
	for _, q := range p.Schema {
		b.WriteString(q + ";\n")
	}
	b.WriteString("\n-- preload (before ferry's first start)\n")
	b.WriteString(script(p.Preload))
	b.WriteString("\n-- workload (sessions run concurrently, each in this order), ferry started before it\n")
	b.WriteString(script(p.Workload))
	b.WriteString("\n-- fault schedule (offset from ferry's first start)\n")
	for _, f := range p.Faults {
		fmt.Fprintf(&b, "-- %8s %s\n", f.At.Round(time.Millisecond), f.label())
	}
	return b.String()
}
