package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// walPosition reads the WAL insert position (bytes since 0/0: where the
// next record goes, not pg_current_wal_lsn()'s write position, which
// trails it by up to the unwritten WAL buffers) and, with hasStatWAL, the
// cluster's full-page-image count from pg_stat_wal.
func walPosition(ctx context.Context, db *pgxpool.Pool, hasStatWAL bool) (lsn int64, fpi *int64, err error) {
	if err := db.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&lsn); err != nil {
		return 0, nil, fmt.Errorf("read WAL position: %w", err)
	}
	if !hasStatWAL {
		return lsn, nil, nil
	}
	var n int64
	if err := db.QueryRow(ctx, `SELECT wal_fpi FROM pg_stat_wal`).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("read pg_stat_wal: %w", err)
	}
	return lsn, &n, nil
}

// pagesWritten reads how many data pages the server has written so far,
// by the checkpointer, the background writer and backends. Before
// PostgreSQL 16 that is pg_stat_bgwriter; from 16 on, pg_stat_io.
func pagesWritten(ctx context.Context, db *pgxpool.Pool, versionNum int) (int64, error) {
	q := `SELECT (buffers_checkpoint + buffers_clean + buffers_backend)::bigint FROM pg_stat_bgwriter`
	if versionNum >= 160000 {
		q = `SELECT coalesce(sum(writes), 0)::bigint FROM pg_stat_io WHERE object = 'relation'`
	}
	var n int64
	if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("read pages written: %w", err)
	}
	return n, nil
}

// relations are a strategy's heap relations (the partitions of a
// partitioned table, else the table) and their PK indexes.
type relations struct {
	heaps   []uint32
	indexes []uint32
}

func findRelations(ctx context.Context, db *pgxpool.Pool, table string) (relations, error) {
	rows, err := db.Query(ctx, `SELECT t.relid::oid, i.indexrelid
		FROM (SELECT relid FROM pg_partition_tree($1::regclass) WHERE isleaf
		      UNION SELECT oid FROM pg_class WHERE oid = $1::regclass AND relkind = 'r') t
		JOIN pg_index i ON i.indrelid = t.relid AND i.indisprimary ORDER BY 1`, table)
	if err != nil {
		return relations{}, fmt.Errorf("list relations of %s: %w", table, err)
	}
	defer rows.Close()
	var r relations
	for rows.Next() {
		var h, i uint32
		if err := rows.Scan(&h, &i); err != nil {
			return r, fmt.Errorf("list relations of %s: %w", table, err)
		}
		r.heaps, r.indexes = append(r.heaps, h), append(r.indexes, i)
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("list relations of %s: %w", table, err)
	}
	if len(r.indexes) == 0 {
		return r, fmt.Errorf("%s has no primary-key index", table)
	}
	return r, nil
}

// sizes measured after a run.
type sizes struct {
	heap, index int64
	density     float64
}

func measureSizes(ctx context.Context, db *pgxpool.Pool, rel relations) (sizes, error) {
	var s sizes
	if err := db.QueryRow(ctx, `SELECT (SELECT coalesce(sum(pg_relation_size(h)), 0)::bigint FROM unnest($1::oid[]) h),
		(SELECT coalesce(sum(pg_relation_size(i)), 0)::bigint FROM unnest($2::oid[]) i)`, rel.heaps, rel.indexes).Scan(&s.heap, &s.index); err != nil {
		return s, fmt.Errorf("measure sizes: %w", err)
	}
	// Weighted by leaf pages, so that hash partitions add up to one index.
	err := db.QueryRow(ctx, `SELECT coalesce(sum(s.avg_leaf_density * s.leaf_pages) / nullif(sum(s.leaf_pages), 0), 0)::float8
		FROM unnest($1::oid[]) i, pgstatindex(i::regclass) s`, rel.indexes).Scan(&s.density)
	if err != nil {
		return s, fmt.Errorf("pgstatindex: %w", err)
	}
	return s, nil
}

// sampler polls pg_stat_activity and pg_buffercache twice a second while
// the load runs.
type sampler struct {
	waits   map[string]int64
	samples int
	foreign int64
	blocks  map[blockKey]*HotBlock
	stop    chan struct{}
	done    sync.WaitGroup
	err     error
	indexes []uint32
	loadApp string
}

// A pinned block counts as the right edge when it lies within
// rightEdgeFraction of its index's blocks from the last one, and at least
// rightEdgeMinBlocks: the edge moves while a sample is taken (tens of
// blocks a second under a fast insert load), so an exact match with the
// last block would miss it, and a fixed count would cover a small index
// whole.
const (
	rightEdgeFraction  = 0.01
	rightEdgeMinBlocks = 4
)

func rightEdge(maxBlock int64) int64 {
	return max(rightEdgeMinBlocks, int64(float64(maxBlock+1)*rightEdgeFraction))
}

type blockKey struct {
	index uint32
	block int64
}

func startSampler(ctx context.Context, db *pgxpool.Pool, indexes []uint32, loadApp string, every time.Duration) *sampler {
	s := &sampler{waits: map[string]int64{}, blocks: map[blockKey]*HotBlock{}, stop: make(chan struct{}), indexes: indexes, loadApp: loadApp}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.stop:
				return
			case <-t.C:
				if err := s.sample(ctx, db); err != nil && s.err == nil && ctx.Err() == nil {
					s.err = err
				}
			}
		}
	}()
	return s
}

// finish stops the sampler and returns what it saw.
func (s *sampler) finish() error {
	close(s.stop)
	s.done.Wait()
	return s.err
}

func (s *sampler) sample(ctx context.Context, db *pgxpool.Pool) error {
	// A load backend that is not active waits for its client: counted as
	// Idle, so that a client-bound run does not look server-bound.
	rows, err := db.Query(ctx, `SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type || ':' || wait_event, 'CPU') ELSE 'Idle' END,
			application_name = $1, count(*)
		FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'
		  AND (state = 'active' OR application_name = $1)
		GROUP BY 1, 2`, s.loadApp)
	if err != nil {
		return fmt.Errorf("sample pg_stat_activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ev string
		var ours bool
		var n int64
		if err := rows.Scan(&ev, &ours, &n); err != nil {
			return fmt.Errorf("sample pg_stat_activity: %w", err)
		}
		if ours {
			s.waits[ev] += n
		} else {
			s.foreign += n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sample pg_stat_activity: %w", err)
	}
	s.samples++
	return s.sampleBlocks(ctx, db)
}

// sampleBlocks records the PK-index blocks pinned right now. reldatabase
// is filtered because relfilenodes repeat across databases.
func (s *sampler) sampleBlocks(ctx context.Context, db *pgxpool.Pool) error {
	rows, err := db.Query(ctx, `SELECT c.oid, c.relname, b.relblocknumber::bigint, b.pinning_backends::bigint,
			(pg_relation_size(c.oid) / current_setting('block_size')::int - 1)::bigint
		FROM pg_buffercache b JOIN pg_class c ON b.relfilenode = pg_relation_filenode(c.oid)
		WHERE b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND c.oid = ANY($1::oid[]) AND b.pinning_backends > 0`, s.indexes)
	if err != nil {
		return fmt.Errorf("sample pg_buffercache: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var oid uint32
		var hb HotBlock
		if err := rows.Scan(&oid, &hb.Index, &hb.Block, &hb.Pins, &hb.MaxBlock); err != nil {
			return fmt.Errorf("sample pg_buffercache: %w", err)
		}
		k := blockKey{oid, hb.Block}
		if prev, ok := s.blocks[k]; ok {
			prev.Pins += hb.Pins
			prev.Samples++
			prev.MaxBlock = hb.MaxBlock
			continue
		}
		hb.Samples = 1
		s.blocks[k] = &hb
	}
	return rows.Err()
}

// hottest returns the n most-pinned leaf blocks, and the share of leaf
// pins that fell within rightEdge of their index's last block. isLeaf
// tells leaves from the metapage, the root and inner pages, which every
// descent pins.
func (s *sampler) hottest(n int, isLeaf func(index uint32, block int64) bool) ([]HotBlock, float64) {
	all := make([]HotBlock, 0, len(s.blocks))
	var total, edge int64
	for k, b := range s.blocks {
		if !isLeaf(k.index, k.block) {
			continue
		}
		all = append(all, *b)
		total += b.Pins
		if b.MaxBlock-b.Block < rightEdge(b.MaxBlock) {
			edge += b.Pins
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Pins != all[j].Pins {
			return all[i].Pins > all[j].Pins
		}
		return all[i].Block > all[j].Block
	})
	if len(all) > n {
		all = all[:n]
	}
	if total == 0 {
		return all, 0
	}
	return all, float64(edge) / float64(total)
}

// nonLeaves reads the page type of the most-pinned sampled blocks
// (pageinspect) and returns those that are not leaves. Inner pages are
// few and pinned by every descent, so they are among the most pinned;
// blocks past the ones read count as leaves.
func (s *sampler) nonLeaves(ctx context.Context, db *pgxpool.Pool, limit int) (map[blockKey]bool, error) {
	keys := make([]blockKey, 0, len(s.blocks))
	for k := range s.blocks {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return s.blocks[keys[i]].Pins > s.blocks[keys[j]].Pins })
	if len(keys) > limit {
		keys = keys[:limit]
	}
	out := map[blockKey]bool{}
	for _, k := range keys {
		if k.block == 0 { // the metapage
			out[k] = true
			continue
		}
		var typ string
		err := db.QueryRow(ctx, `SELECT type FROM bt_page_stats($1::regclass::text, $2)`, k.index, k.block).Scan(&typ)
		if err != nil {
			return out, fmt.Errorf("bt_page_stats (pageinspect, superuser): %w", err)
		}
		if typ != "l" {
			out[k] = true
		}
	}
	return out, nil
}

// readSettings reads back what the numbers depend on.
func readSettings(ctx context.Context, db *pgxpool.Pool) (Settings, error) {
	var s Settings
	err := db.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('server_version_num')::int,
		current_setting('synchronous_commit'), current_setting('shared_buffers'), current_setting('wal_level'),
		current_setting('full_page_writes'), current_setting('checkpoint_timeout'), current_setting('max_wal_size'),
		current_setting('max_connections'), current_setting('wal_compression'), current_setting('data_checksums'),
		current_setting('wal_log_hints'), current_setting('checkpoint_completion_target'),
		(SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings WHERE name = 'shared_buffers')`).Scan(
		&s.ServerVersion, &s.ServerVersionNum, &s.SynchronousCommit,
		&s.SharedBuffers, &s.WALLevel, &s.FullPageWrites, &s.CheckpointTimeout, &s.MaxWALSize, &s.MaxConnections,
		&s.WALCompression, &s.DataChecksums, &s.WALLogHints, &s.CheckpointCompletion, &s.SharedBuffersBytes)
	if err != nil {
		return s, fmt.Errorf("read settings: %w", err)
	}
	s.Fillfactor = map[string]int{}
	return s, nil
}

// indexFillfactor reads a PK index's fillfactor from its reloptions; the
// btree default is 90.
func indexFillfactor(ctx context.Context, db *pgxpool.Pool, index uint32) (int, error) {
	var ff int
	err := db.QueryRow(ctx, `SELECT coalesce((SELECT option_value::int FROM pg_options_to_table(c.reloptions)
		WHERE option_name = 'fillfactor'), 90) FROM pg_class c WHERE c.oid = $1`, index).Scan(&ff)
	if err != nil {
		return 0, fmt.Errorf("read fillfactor: %w", err)
	}
	return ff, nil
}

func readMachine(settings Settings) Machine {
	host, _ := os.Hostname()
	return Machine{Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH, Cores: runtime.NumCPU(),
		MemoryBytes: memTotal(), GoVersion: runtime.Version(), ServerVersion: settings.ServerVersion}
}

// memTotal reads MemTotal from /proc/meminfo; 0 where there is none.
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
