package bench

import (
	"fmt"
	"sort"
	"strings"
)

// findings states what the numbers show, comparison by comparison, without
// reasons: a reader checks each line against the tables.
func findings(res *Results) []string {
	var out []string
	for _, w := range res.Params.Workloads {
		for _, c := range res.Params.Clients {
			var es []Entry
			for _, e := range entriesOf(res, w) {
				if e.Clients == c && e.N > 0 {
					es = append(es, e)
				}
			}
			if len(es) < 2 {
				continue
			}
			out = append(out, workloadFindings(w, c, es)...)
		}
	}
	return out
}

func workloadFindings(w string, c int, es []Entry) []string {
	pre := fmt.Sprintf("%s, %d clients: ", w, c)
	var out []string
	byTPS := sortedBy(es, func(e Entry) float64 { return e.TPS })
	hi, lo := byTPS[len(byTPS)-1], byTPS[0]
	line := fmt.Sprintf("%shighest median tps %s (%.0f), lowest %s (%.0f), %.2f×", pre, hi.Strategy, hi.TPS, lo.Strategy, lo.TPS, hi.TPS/lo.TPS)
	if len(byTPS) > 2 {
		second := byTPS[len(byTPS)-2]
		if second.Spread.Max >= hi.Spread.Min {
			line += fmt.Sprintf("; the tps ranges of %s and %s overlap", hi.Strategy, second.Strategy)
		}
	}
	if base, ok := find(es, "bigserial"); ok && base.TPS > 0 {
		line += fmt.Sprintf("; relative to bigserial: %s", relative(byTPS, base.TPS))
	}
	out = append(out, line+".")
	byWAL := sortedBy(es, func(e Entry) float64 { return e.WALBytesPerRow })
	line = fmt.Sprintf("%sWAL bytes per row from %.0f (%s) to %.0f (%s)", pre, byWAL[0].WALBytesPerRow, byWAL[0].Strategy,
		byWAL[len(byWAL)-1].WALBytesPerRow, byWAL[len(byWAL)-1].Strategy)
	if fp := sortedBy(es, fpi); fpi(fp[len(fp)-1]) > 0 {
		line += fmt.Sprintf("; full-page images per row highest for %s (%.3f), lowest for %s (%.3f)",
			fp[len(fp)-1].Strategy, fpi(fp[len(fp)-1]), fp[0].Strategy, fpi(fp[0]))
	}
	if pw := sortedBy(es, func(e Entry) float64 { return e.PagesWrittenPerRow }); pw[len(pw)-1].PagesWrittenPerRow > 0 {
		line += fmt.Sprintf("; data pages written per row from %.4f (%s) to %.4f (%s)", pw[0].PagesWrittenPerRow, pw[0].Strategy,
			pw[len(pw)-1].PagesWrittenPerRow, pw[len(pw)-1].Strategy)
	}
	out = append(out, line+".")
	bc := sortedBy(es, func(e Entry) float64 { return e.BufferContentSamples })
	out = append(out, fmt.Sprintf("%sLWLock:BufferContent samples (medians over the runs) from %.0f (%s) to %.0f (%s), out of about %d samples of %d backends.", pre,
		bc[0].BufferContentSamples, bc[0].Strategy, bc[len(bc)-1].BufferContentSamples, bc[len(bc)-1].Strategy,
		bc[len(bc)-1].WaitSamples, c))
	if strings.HasPrefix(w, "insert") {
		out = append(out, insertFindings(pre, es)...)
	}
	if l := lagFinding(pre, es); l != "" {
		out = append(out, l)
	}
	return out
}

func insertFindings(pre string, es []Entry) []string {
	var edge, spread []string
	for _, e := range es {
		if len(e.HotBlocks) == 0 {
			continue
		}
		s := fmt.Sprintf("%s %.0f%%", e.Strategy, 100*e.RightEdgePinShare)
		if e.RightEdgePinShare >= 0.5 {
			edge = append(edge, s)
		} else {
			spread = append(spread, s)
		}
	}
	var out []string
	if len(edge)+len(spread) > 0 {
		out = append(out, fmt.Sprintf("%sshare of sampled PK-index leaf pins within %.0f%% of the index's blocks (at least %d) of its last block: %s.", pre,
			100*rightEdgeFraction, rightEdgeMinBlocks,
			strings.Join(append(edge, spread...), ", ")))
	}
	var dens []string
	for _, e := range sortedBy(es, func(e Entry) float64 { return e.AvgLeafDensity }) {
		dens = append(dens, fmt.Sprintf("%s %.1f (fillfactor %d, %.1f index B/row)", e.Strategy, e.AvgLeafDensity, e.Fillfactor, e.BytesPerRow))
	}
	out = append(out, fmt.Sprintf("%savg_leaf_density after these runs: %s.", pre, strings.Join(dens, ", ")))
	return out
}

func lagFinding(pre string, es []Entry) string {
	var withLag []Entry
	for _, e := range es {
		if e.Lag != nil {
			withLag = append(withLag, e)
		}
	}
	if len(withLag) == 0 {
		return ""
	}
	bl := sortedBy(withLag, func(e Entry) float64 { return float64(e.Lag.PeakBytes) })
	cu := sortedBy(withLag, func(e Entry) float64 { return e.Lag.CatchupSeconds })
	top, bottom := bl[len(bl)-1], bl[0]
	return fmt.Sprintf("%speak replication lag from %.1f MB / %.2f s (%s) to %.1f MB / %.2f s (%s); catch-up after the load from %.2f s (%s) to %.2f s (%s).",
		pre, float64(bottom.Lag.PeakBytes)/(1<<20), bottom.Lag.PeakSeconds, bottom.Strategy,
		float64(top.Lag.PeakBytes)/(1<<20), top.Lag.PeakSeconds, top.Strategy,
		cu[0].Lag.CatchupSeconds, cu[0].Strategy, cu[len(cu)-1].Lag.CatchupSeconds, cu[len(cu)-1].Strategy)
}

func fpi(e Entry) float64 {
	if e.FPIPerRow == nil {
		return 0
	}
	return *e.FPIPerRow
}

func sortedBy(es []Entry, key func(Entry) float64) []Entry {
	out := append([]Entry(nil), es...)
	sort.SliceStable(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

func find(es []Entry, strategy string) (Entry, bool) {
	for _, e := range es {
		if e.Strategy == strategy {
			return e, true
		}
	}
	return Entry{}, false
}

func relative(byTPS []Entry, base float64) string {
	var parts []string
	for i := len(byTPS) - 1; i >= 0; i-- {
		e := byTPS[i]
		if e.Strategy == "bigserial" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %+.0f%%", e.Strategy, 100*(e.TPS/base-1)))
	}
	return strings.Join(parts, ", ")
}
