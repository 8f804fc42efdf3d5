package torture

import (
	"math/rand/v2"
	"slices"
)

// Publication changes under load (issue 15: ALTER PUBLICATION among the
// random DDL). In one round in Size.PublicationEvery a session drops one
// or two of the round's first tables from ferry's publication and, three
// times in four, adds it back later. PostgreSQL sends nothing of a table
// while it is out, so ferry must notice the return and copy it afresh
// (docs/LIMITATIONS.md); the checks compare the tables published at the
// end, so a table left out is not compared and one added back must hold
// every row.

// publicationStream is the PCG stream of the publication draws, so that a
// size without them generates the plans it did before.
const publicationStream = 0x7075626c69636174

// addPublicationChanges inserts the changes into p.Workload; firstTables
// is how many of g.tables exist before the workload (a table the workload
// creates may not exist yet when another session alters the publication).
func addPublicationChanges(p *Plan, g *gen, sz Size, firstTables int) {
	if sz.PublicationEvery <= 0 || g.avoid["publication"] || len(p.Workload) == 0 {
		return
	}
	r := rand.New(rand.NewPCG(p.Seed^publicationStream, p.Round))
	if r.IntN(sz.PublicationEvery) != 0 {
		return
	}
	picked := map[int]bool{}
	for n := 1 + r.IntN(2); n > 0; n-- {
		i := r.IntN(firstTables)
		if picked[i] {
			continue
		}
		picked[i] = true
		t := g.tables[i]
		pub := "ferry"
		if t.Key == keyAppend {
			pub = "ferry_append" // --append-only tables' insert-only publication
		}
		sess := r.IntN(p.Sessions)
		at := r.IntN(len(p.Workload) + 1)
		p.Workload = slices.Insert(p.Workload, at, g.newOp(sess, "publication-drop-table", s("ALTER PUBLICATION "+pub+" DROP TABLE "+t.q())))
		if r.IntN(4) != 0 {
			// Later in the same session, so it runs after the drop.
			back := at + 1 + r.IntN(len(p.Workload)-at)
			p.Workload = slices.Insert(p.Workload, back, g.newOp(sess, "publication-add-table", s("ALTER PUBLICATION "+pub+" ADD TABLE "+t.q())))
		}
	}
}
