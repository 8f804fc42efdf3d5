package torture

import (
	"math/rand/v2"
	"slices"
	"strings"
)

// Resync requests under load (issue 16: `ferry resync` copies a table
// beside the stream). In one round in Size.ResyncEvery a session asks for
// one to three resyncs of the round's first tables, as `ferry resync`
// does: a ferry.resync logical decoding message in the WAL. The copy then
// runs while every session goes on writing, and the faults of the round
// may cut it; the checks at the end compare every table as usual.

// resyncStream is the PCG stream of the resync draws, so that a size
// without them generates the plans it did before.
const resyncStream = 0x726573796e63

// addResyncs inserts the requests into p.Workload; firstTables is how many
// of g.tables exist before the workload.
func addResyncs(p *Plan, g *gen, sz Size, firstTables int) {
	if sz.ResyncEvery <= 0 || len(p.Workload) == 0 {
		return
	}
	r := rand.New(rand.NewPCG(p.Seed^resyncStream, p.Round))
	if r.IntN(sz.ResyncEvery) != 0 {
		return
	}
	for n := 1 + r.IntN(3); n > 0; n-- {
		t := g.tables[r.IntN(firstTables)]
		at := r.IntN(len(p.Workload) + 1)
		p.Workload = slices.Insert(p.Workload, at, g.newOp(r.IntN(p.Sessions), "resync", s(resyncSQL(t))))
	}
}

// resyncSQL writes the request `ferry resync` writes for t (replicator's
// resyncRequest): the table's OID and name, and when it was asked.
func resyncSQL(t *table) string {
	name := "'" + strings.ReplaceAll(t.q(), "'", "''") + "'"
	return "SELECT pg_logical_emit_message(true, 'ferry.resync', json_build_object('tables', json_build_array(json_build_object(" +
		"'oid', " + name + "::regclass::oid::bigint, 'name', " + name + ")), 'at', now())::text)"
}
