package bench

import (
	"fmt"
	"sort"
	"strings"
)

// Report renders report.md: the settings, one table per workload in the
// shape of the seeds' tables, the wait-event histograms, and a short list
// of what the numbers show. It states numbers only; it does not explain.
func Report(res *Results) string {
	var b strings.Builder
	p := res.Params
	fmt.Fprintf(&b, "# ferry bench\n\n")
	fmt.Fprintf(&b, "PostgreSQL %s, %d cores, %.1f GiB memory, %s. ", res.Settings.ServerVersion, res.Machine.Cores,
		float64(res.Machine.MemoryBytes)/(1<<30), res.Machine.GoVersion)
	fmt.Fprintf(&b, "shared_buffers=%s, synchronous_commit=%s on the load connections (server default %s), wal_level=%s, full_page_writes=%s.\n\n",
		res.Settings.SharedBuffers, res.Settings.SynchronousCommitLoad, res.Settings.SynchronousCommit, res.Settings.WALLevel, res.Settings.FullPageWrites)
	fmt.Fprintf(&b, "wal_compression=%s, data_checksums=%s, wal_log_hints=%s, checkpoint_completion_target=%s, max_wal_size=%s, checkpoint_timeout=%s.\n\n",
		res.Settings.WALCompression, res.Settings.DataChecksums, res.Settings.WALLogHints, res.Settings.CheckpointCompletion,
		res.Settings.MaxWALSize, res.Settings.CheckpointTimeout)
	fmt.Fprintf(&b, "WAL figures from %s (%s).", res.WALSource, res.WALSourceNote)
	if p.TablePerRun {
		b.WriteString(" Every run on a table created and seeded anew, autovacuum off for it")
		if p.SyntheticClock {
			fmt.Fprintf(&b, "; time-ordered keys on a synthetic clock of 1 ms per %d keys", p.KeysPerMillisecond)
		}
		b.WriteString(".")
	}
	b.WriteString("\n\n")
	for _, w := range res.Warnings {
		fmt.Fprintf(&b, "Warning: %s.\n\n", w)
	}
	fmt.Fprintf(&b, "%d clients, %gs per run, %d seed rows per table, n=%d runs (medians; ranges over the runs), insert-batch %d rows per transaction, key seed %d",
		p.Clients[0], p.DurationSeconds, p.SeedRows, p.Runs, p.BatchRows, p.KeySeed)
	if len(p.Clients) > 1 {
		fmt.Fprintf(&b, ", client sweep %v", p.Clients)
	}
	if p.WithCDC {
		fmt.Fprintf(&b, ", ferry's replicator reading the same WAL into a %s sink", p.CDCSink)
	}
	if p.CheckpointBefore {
		b.WriteString(", CHECKPOINT before each run")
	}
	b.WriteString(".\n\n")
	for _, s := range res.Skipped {
		fmt.Fprintf(&b, "Skipped %s: %s.\n\n", s.Strategy, s.Reason)
	}
	for _, w := range p.Workloads {
		entries := entriesOf(res, w)
		if len(entries) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s\n\n", w)
		writeTable(&b, entries, p.WithCDC)
		writeWaits(&b, entries)
	}
	writeSanity(&b, res)
	b.WriteString("## What this run shows\n\n")
	for _, line := range findings(res) {
		fmt.Fprintf(&b, "- %s\n", line)
	}
	return b.String()
}

func entriesOf(res *Results, workload string) []Entry {
	var out []Entry
	for _, e := range res.Runs {
		if e.Workload == workload {
			out = append(out, e)
		}
	}
	return out
}

func writeTable(b *strings.Builder, entries []Entry, cdc bool) {
	b.WriteString("| strategy | clients | tps (min–max) | rows/s | p50 / p95 / p99 ms | WAL B/row (min–max) | FPI/row (min–max) | pages written/row | PK index MB | index B/row | avg_leaf_density | BufferContent samples (min–max) | top wait | hottest PK block / max_block |")
	sep := "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
	if cdc {
		b.WriteString(" peak lag MB / s | catch-up s |")
		sep += "---:|---:|"
	}
	b.WriteString("\n" + sep + "\n")
	cols := strings.Count(sep, "|") - 1
	for _, e := range entries {
		if e.N == 0 {
			// Zeros would read as measurements: say there are none.
			fmt.Fprintf(b, "| %s | %d | no kept run of %d (see Sanity) |%s\n", e.Strategy, e.Clients, len(e.PerRun),
				strings.Repeat(" – |", cols-3))
			continue
		}
		wr := e.Ranges["wal_bytes_per_row"]
		bc := e.Ranges["buffer_content_samples"]
		fmt.Fprintf(b, "| %s | %d | %.0f (%.0f–%.0f) | %.0f | %.2f / %.2f / %.2f | %.0f (%.0f–%.0f) | %s | %.4f | %.1f | %.1f | %.2f | %.0f (%.0f–%.0f) | %s | %s |",
			e.Strategy, e.Clients, e.TPS, e.Spread.Min, e.Spread.Max, e.RowsPerSecond, e.LatencyMS.P50, e.LatencyMS.P95, e.LatencyMS.P99,
			e.WALBytesPerRow, wr.Min, wr.Max, fpiText(e.FPIPerRow, e.Ranges["fpi_per_row"]), e.PagesWrittenPerRow, float64(e.IndexBytes)/(1<<20), e.BytesPerRow, e.AvgLeafDensity,
			e.BufferContentSamples, bc.Min, bc.Max, topWait(e), hotText(e))
		if cdc {
			if e.Lag != nil {
				fmt.Fprintf(b, " %.1f / %.2f | %.2f |", float64(e.Lag.PeakBytes)/(1<<20), e.Lag.PeakSeconds, e.Lag.CatchupSeconds)
			} else {
				b.WriteString(" – | – |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

func fpiText(v *float64, r Spread) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.4f (%.4f–%.4f)", *v, r.Min, r.Max)
}

func hotText(e Entry) string {
	if len(e.HotBlocks) == 0 {
		return "–"
	}
	h := e.HotBlocks[0]
	return fmt.Sprintf("%d / %d (%d pins)", h.Block, h.MaxBlock, h.Pins)
}

// sortedWaits returns the wait events by samples, most first.
func sortedWaits(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// topWait is the most-sampled wait inside the server: not running on
// CPU, not idle, not waiting for the client (Client:ClientRead is pgx
// between the messages of one query).
func topWait(e Entry) string {
	for _, k := range sortedWaits(e.WaitEvents) {
		if k != "CPU" && k != "Idle" && !strings.HasPrefix(k, "Client:") {
			return fmt.Sprintf("%s (%d)", k, e.WaitEvents[k])
		}
	}
	return "–"
}

func writeWaits(b *strings.Builder, entries []Entry) {
	b.WriteString("Wait events of the load backends (pg_stat_activity, twice a second; CPU = active with no wait event; Idle = waiting for its client between queries):\n\n```\n")
	for _, e := range entries {
		fmt.Fprintf(b, "%-14s c=%-4d", e.Strategy, e.Clients)
		if e.N == 0 {
			b.WriteString(" no kept run\n")
			continue
		}
		for i, k := range sortedWaits(e.WaitEvents) {
			if i == 5 {
				break
			}
			fmt.Fprintf(b, " %6d %s", e.WaitEvents[k], k)
		}
		if e.ForeignActive > 0 {
			fmt.Fprintf(b, "   [other sessions active: %d samples]", e.ForeignActive)
		}
		b.WriteString("\n")
	}
	b.WriteString("```\n\n")
}

func writeSanity(b *strings.Builder, res *Results) {
	b.WriteString("## Sanity\n\n")
	var failed, discarded int
	for _, e := range res.Runs {
		for _, d := range e.Disturbed {
			fmt.Fprintf(b, "- kept but disturbed (--keep-disturbed) %s %s c=%d run %d: %s\n", e.Strategy, e.Workload, e.Clients, d.Run, d.Reason)
		}
		for _, d := range e.Discarded {
			discarded++
			fmt.Fprintf(b, "- discarded %s %s c=%d run %d: %s\n", e.Strategy, e.Workload, e.Clients, d.Run, d.Reason)
		}
		if !e.Sanity.Passed {
			failed++
		}
	}
	if discarded == 0 {
		b.WriteString("Every run passed every check: settings read back, no failed transaction, exact row count, UUID version and variant of every key, " +
			"no checkpoint, autovacuum or other databases' WAL in its window (where pg_waldump read it)")
		if res.Params.WithCDC {
			b.WriteString(", the replicator caught up")
		}
		b.WriteString(".\n")
	}
	if failed > 0 {
		fmt.Fprintf(b, "\n%d combinations have no run that passed.\n", failed)
	}
	b.WriteString("\n")
}
