package bench

import (
	"context"
	"fmt"
)

// selfCheckName is the self-check's Check.
const selfCheckName = "WAL figures match pg_waldump --stats"

// selfCheck reads the window's WAL again, through pg_waldump's own
// totals (--stats) and its own full-page filter (--fullpage), and compares
// them with the run's figures: records, record bytes, full-page images
// and their bytes within 1%, and the window's LSN distance no smaller
// than the records it holds.
func (b *bencher) selfCheck(ctx context.Context, r *RunResult, w *window, run int) (Check, error) {
	st, err := b.wal.stats(ctx, w.start, w.end)
	if err != nil {
		return Check{}, err
	}
	fpw, err := b.wal.fullPageCount(ctx, w.start, w.end)
	if err != nil {
		return Check{}, err
	}
	var fpi int64
	if r.FPI != nil {
		fpi = *r.FPI
	}
	return compareWAL(run, r.WALBytes, r.WALRecords, r.WALRecordBytes, fpi, r.FPIBytes, st, fpw), nil
}

// compareWAL is the self-check's verdict.
func compareWAL(run int, lsnBytes, records, recordBytes, fpi, fpiBytes int64, st dumpStats, fpw int64) Check {
	c := Check{Run: run, Name: selfCheckName, Passed: true}
	c.Detail = fmt.Sprintf("records %d / %d, record bytes %d / %d, FPIs %d / %d, FPI bytes %d / %d (run / pg_waldump), LSN distance %d",
		records, st.Records, recordBytes, st.RecordBytes, fpi, fpw, fpiBytes, st.FPIBytes, lsnBytes)
	for _, p := range [][2]int64{{records, st.Records}, {recordBytes, st.RecordBytes}, {fpi, fpw}, {fpiBytes, st.FPIBytes}} {
		if !within(p[0], p[1], 0.01) {
			c.Passed = false
		}
	}
	if lsnBytes < st.RecordBytes {
		c.Passed = false
		c.Detail += "; the LSN distance is smaller than the records in it"
	}
	return c
}

// within reports whether a and b differ by at most frac of the larger.
func within(a, b int64, frac float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return float64(d) <= frac*float64(max(a, b))
}
