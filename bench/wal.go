package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The sources of a run's WAL figures.
const (
	// WALSourceWALDump counts records, bytes and full-page images from the
	// run's own WAL, read by pg_waldump between the window's two insert
	// positions while a physical slot keeps the segments.
	WALSourceWALDump = "pg_waldump"
	// WALSourceStatWAL is pg_stat_wal's cluster-wide counters, which
	// backends publish late: approximate, kept only as the fallback.
	WALSourceStatWAL = "pg_stat_wal (approximate)"
)

// walReader runs pg_waldump on the server's WAL directory.
type walReader struct {
	bin     string // pg_waldump
	dir     string // the server's pg_wal
	db      uint32 // the benchmark database's oid, to tell its WAL from others'
	tli     string // the timeline, as WAL file names spell it
	segSize int64  // wal_segment_size in bytes
}

// args are pg_waldump's arguments for the WAL from start to end. The
// segment files are named: without them pg_waldump learns the segment
// size from whichever WAL file the directory lists first, and a file the
// server has created ahead, still all zeros, makes it fail.
func (w *walReader) args(start, end int64, more ...string) []string {
	// Given a first segment alone, pg_waldump reads no further than it: the
	// last one, holding the byte before end, is named too.
	return append([]string{"--path", w.dir, "--start", lsnText(start), "--end", lsnText(end)}, append(more, w.segment(start), w.segment(max(end-1, start)))...)
}

// segment is the name of the WAL file holding the byte at lsn.
func (w *walReader) segment(lsn int64) string {
	seg := lsn / w.segSize
	perID := int64(0x100000000) / w.segSize
	return fmt.Sprintf("%s%08X%08X", w.tli, seg/perID, seg%perID)
}

// openWALReader checks that pg_waldump can read this server's WAL: a
// binary of the server's major version and a readable pg_wal holding the
// current segment (so the benchmark runs on the server's host). It returns
// why not when it cannot.
func openWALReader(ctx context.Context, db *pgxpool.Pool, bin string, versionNum int) (*walReader, string) {
	if bin == "" {
		return nil, "no pg_waldump was given (--pg-waldump, or pg_config --bindir on the PATH)"
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return nil, fmt.Sprintf("%s --version: %v", bin, err)
	}
	if major := waldumpMajor(string(out)); major != versionNum/10000 {
		return nil, fmt.Sprintf("%s is from PostgreSQL %d, the server is %d: give the server's own (--pg-waldump)", bin, major, versionNum/10000)
	}
	var dataDir, segment string
	var oid uint32
	var segSize int64
	// The flush position's segment, not the insert position's: WAL inserted
	// into buffers may lie in a segment whose file is not created yet.
	if err := db.QueryRow(ctx, `SELECT current_setting('data_directory'), pg_walfile_name(pg_current_wal_flush_lsn()),
		(SELECT oid FROM pg_database WHERE datname = current_database()),
		(SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size')`).Scan(&dataDir, &segment, &oid, &segSize); err != nil {
		return nil, fmt.Sprintf("read data_directory (needs superuser or pg_read_all_settings): %v", err)
	}
	dir := filepath.Join(dataDir, "pg_wal")
	f, err := os.Open(filepath.Join(dir, segment))
	if err != nil {
		return nil, fmt.Sprintf("cannot read the server's WAL (%v): pg_waldump needs the benchmark on the server's host, as a user that may read its data directory", err)
	}
	f.Close()
	if len(segment) != 24 || segSize <= 0 {
		return nil, fmt.Sprintf("unexpected WAL file name %q or wal_segment_size %d", segment, segSize)
	}
	return &walReader{bin: bin, dir: dir, db: oid, tli: segment[:8], segSize: segSize}, ""
}

var waldumpVersion = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

func waldumpMajor(version string) int {
	m := waldumpVersion.FindStringSubmatch(version)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// walStats is what one window's WAL holds.
type walStats struct {
	Records     int64 // every record in the window
	RecordBytes int64 // their total length, full-page images included
	FPI         int64 // full-page images
	FPIBytes    int64
	// ForeignBytes are records that change another database's blocks, and
	// their transactions' records: other sessions writing meanwhile.
	ForeignBytes int64
	ForeignFPI   int64
	// CheckpointRedo lists the redo positions of the checkpoints whose
	// record lies in the window.
	CheckpointRedo []int64
}

// dump reads the records between start and end (insert positions, bytes
// since 0/0); a record that ends after end is not counted.
func (w *walReader) dump(ctx context.Context, start, end int64) (walStats, error) {
	cmd := exec.CommandContext(ctx, w.bin, w.args(start, end)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return walStats{}, err
	}
	if err := cmd.Start(); err != nil {
		return walStats{}, fmt.Errorf("start pg_waldump: %w", err)
	}
	st, perr := parseDump(stdout, w.db)
	if err := cmd.Wait(); err != nil {
		return st, fmt.Errorf("pg_waldump %s..%s: %v: %s", lsnText(start), lsnText(end), err, strings.TrimSpace(stderr.String()))
	}
	return st, perr
}

// parseDump reads pg_waldump's record lines.
func parseDump(r interface{ Read([]byte) (int, error) }, ownDB uint32) (walStats, error) {
	var st walStats
	// Transactions seen writing another database, by xid: their commit
	// records are the other sessions' too.
	foreignTx := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		rec, ok := parseRecord(sc.Text())
		if !ok {
			continue
		}
		st.Records++
		st.RecordBytes += rec.tot
		st.FPI += int64(rec.fpw)
		st.FPIBytes += rec.tot - rec.rec
		foreign := false
		for _, db := range rec.dbs {
			if db != ownDB && db != 0 {
				foreign = true
			}
		}
		if foreign && rec.xid != "0" {
			foreignTx[rec.xid] = true
		}
		if !foreign && len(rec.dbs) == 0 && rec.xid != "0" && foreignTx[rec.xid] {
			foreign = true
		}
		if foreign {
			st.ForeignBytes += rec.tot
			st.ForeignFPI += int64(rec.fpw)
		}
		if rec.redo >= 0 {
			st.CheckpointRedo = append(st.CheckpointRedo, rec.redo)
		}
	}
	return st, sc.Err()
}

type walRecord struct {
	tot, rec int64
	xid      string
	dbs      []uint32
	fpw      int
	redo     int64 // a checkpoint record's redo position, else -1
}

var (
	recLen  = regexp.MustCompile(`len \(rec/tot\):\s*(\d+)/\s*(\d+), tx:\s*(\d+)`)
	blkRef  = regexp.MustCompile(`blkref #\d+: rel \d+/(\d+)/\d+[^,]*`)
	ckptRec = regexp.MustCompile(`desc: CHECKPOINT_(?:ONLINE|SHUTDOWN) redo ([0-9A-F]+/[0-9A-F]+)`)
)

// parseRecord reads one line of pg_waldump's default output, e.g.
// "rmgr: Btree len (rec/tot): 53/ 5053, tx: 839, lsn: 0/0200A948, prev
// 0/0200A870, desc: INSERT_LEAF off 248, blkref #0: rel 1663/5/2703 blk 2 FPW".
func parseRecord(line string) (walRecord, bool) {
	if !strings.HasPrefix(line, "rmgr: ") {
		return walRecord{}, false
	}
	m := recLen.FindStringSubmatch(line)
	if m == nil {
		return walRecord{}, false
	}
	r := walRecord{redo: -1, xid: m[3]}
	r.rec, _ = strconv.ParseInt(m[1], 10, 64)
	r.tot, _ = strconv.ParseInt(m[2], 10, 64)
	for _, b := range blkRef.FindAllStringSubmatch(line, -1) {
		db, _ := strconv.ParseUint(b[1], 10, 32)
		r.dbs = append(r.dbs, uint32(db))
		if strings.HasSuffix(b[0], " FPW") || strings.Contains(b[0], " FPW ") {
			r.fpw++
		}
	}
	if c := ckptRec.FindStringSubmatch(line); c != nil {
		r.redo, _ = parseLSN(c[1])
	}
	return r, true
}

// dumpStats is pg_waldump --stats' Total line over a window: a second
// reading of the same WAL through pg_waldump's own arithmetic, for the
// self-check.
type dumpStats struct {
	Records, RecordBytes, FPIBytes int64
}

var totalLine = regexp.MustCompile(`(?m)^Total\s+(\d+)\s+(\d+) \[[^]]*\]\s+(\d+) \[[^]]*\]\s+(\d+) \[`)

func (w *walReader) stats(ctx context.Context, start, end int64) (dumpStats, error) {
	out, err := exec.CommandContext(ctx, w.bin, w.args(start, end, "--stats")...).CombinedOutput()
	if err != nil {
		return dumpStats{}, fmt.Errorf("pg_waldump --stats: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return parseStatsTotal(string(out))
}

func parseStatsTotal(out string) (dumpStats, error) {
	m := totalLine.FindStringSubmatch(out)
	if m == nil {
		return dumpStats{}, errors.New("pg_waldump --stats printed no Total line")
	}
	var s dumpStats
	s.Records, _ = strconv.ParseInt(m[1], 10, 64)
	s.FPIBytes, _ = strconv.ParseInt(m[3], 10, 64)
	s.RecordBytes, _ = strconv.ParseInt(m[4], 10, 64)
	return s, nil
}

// fullPageCount counts the images in the records pg_waldump --fullpage
// selects: a filter of pg_waldump's own, not the record parse above.
func (w *walReader) fullPageCount(ctx context.Context, start, end int64) (int64, error) {
	out, err := exec.CommandContext(ctx, w.bin, w.args(start, end, "--fullpage")...).Output()
	if err != nil {
		return 0, fmt.Errorf("pg_waldump --fullpage: %w", err)
	}
	return int64(bytes.Count(out, []byte(" FPW"))), nil
}

func lsnText(n int64) string { return fmt.Sprintf("%X/%X", uint64(n)>>32, uint64(n)&0xFFFFFFFF) }

func parseLSN(s string) (int64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("not an LSN: %q", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, err
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, err
	}
	return int64(h<<32 | l), nil
}

// walSlot is a temporary physical slot that keeps a run's WAL until it is
// read. Temporary, so that a benchmark that dies leaves no slot holding
// WAL: the server drops it with the session.
type walSlot struct {
	conn *pgxpool.Conn
	name string
}

func createWALSlot(ctx context.Context, db *pgxpool.Pool, name string) (*walSlot, error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect for the WAL slot: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true, true)`, name); err != nil {
		conn.Release()
		return nil, fmt.Errorf("create physical slot %s (keeps the run's WAL for pg_waldump): %w", name, err)
	}
	return &walSlot{conn: conn, name: name}, nil
}

// drop drops the slot once; later calls do nothing.
func (s *walSlot) drop(ctx context.Context) error {
	if s == nil || s.conn == nil {
		return nil
	}
	_, err := s.conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, s.name)
	if err != nil {
		// A session that ends drops its temporary slot too.
		s.conn.Conn().Close(ctx) //nolint:errcheck // the error that matters is the drop's
	}
	s.conn.Release()
	s.conn = nil
	if err != nil {
		return fmt.Errorf("drop physical slot %s: %w", s.name, err)
	}
	return nil
}

// waitFlushed waits until the server has flushed its WAL up to lsn, so
// that pg_waldump finds every record of the window on disk (the load runs
// with synchronous_commit off, and the WAL writer flushes on its own time).
func waitFlushed(ctx context.Context, db *pgxpool.Pool, lsn int64) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var flushed int64
		if err := db.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), '0/0')::bigint`).Scan(&flushed); err != nil {
			return fmt.Errorf("read the WAL flush position: %w", err)
		}
		if flushed >= lsn {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("WAL not flushed to %s after 30 s (flushed to %s)", lsnText(lsn), lsnText(flushed))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
