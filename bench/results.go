package bench

import "time"

// Results is everything one `ferry bench` invocation measured; it is
// written as results.json.
type Results struct {
	Machine  Machine   `json:"machine"`
	Settings Settings  `json:"settings"`
	Params   Params    `json:"params"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// WALSource says where the WAL figures come from, WALSourceNote why
	// (or which binary read which directory).
	WALSource     string `json:"wal_source"`
	WALSourceNote string `json:"wal_source_note"`
	// Warnings are conditions that make figures less general, such as an
	// index larger than shared_buffers.
	Warnings []string `json:"warnings,omitempty"`
	// Skipped names strategies the server cannot run, and why.
	Skipped []Skip `json:"skipped,omitempty"`
	// Runs has one entry per strategy × workload × client count.
	Runs []Entry `json:"runs"`
}

// Machine is where the benchmark ran.
type Machine struct {
	Hostname      string `json:"hostname"`
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	Cores         int    `json:"cores"`
	MemoryBytes   int64  `json:"memory_bytes"`
	GoVersion     string `json:"go_version"`
	ServerVersion string `json:"server_version"`
	ClickHouse    string `json:"clickhouse_version,omitempty"`
}

// Settings are the server settings the numbers depend on, read back from
// the server rather than assumed.
type Settings struct {
	ServerVersion     string `json:"server_version"`
	ServerVersionNum  int    `json:"server_version_num"`
	SynchronousCommit string `json:"synchronous_commit"`
	// SynchronousCommitLoad is synchronous_commit as the load connections
	// read it back.
	SynchronousCommitLoad string `json:"synchronous_commit_load"`
	SharedBuffers         string `json:"shared_buffers"`
	WALLevel              string `json:"wal_level"`
	FullPageWrites        string `json:"full_page_writes"`
	CheckpointTimeout     string `json:"checkpoint_timeout"`
	MaxWALSize            string `json:"max_wal_size"`
	MaxConnections        string `json:"max_connections"`
	WALCompression        string `json:"wal_compression"`
	DataChecksums         string `json:"data_checksums"`
	WALLogHints           string `json:"wal_log_hints"`
	CheckpointCompletion  string `json:"checkpoint_completion_target"`
	SharedBuffersBytes    int64  `json:"shared_buffers_bytes"`
	// Fillfactor is each strategy's PK-index fillfactor, read from the catalog.
	Fillfactor map[string]int `json:"fillfactor"`
}

// Params are the benchmark's own parameters.
type Params struct {
	Strategies        []string `json:"strategies"`
	Workloads         []string `json:"workloads"`
	Clients           []int    `json:"clients"`
	DurationSeconds   float64  `json:"duration_seconds"`
	SeedRows          int      `json:"seed_rows"`
	Runs              int      `json:"runs"`
	BatchRows         int      `json:"batch_rows"`
	Partitions        int      `json:"partitions"`
	PayloadBytes      int      `json:"payload_bytes"`
	KeySeed           uint64   `json:"key_seed"`
	SynchronousCommit string   `json:"synchronous_commit"`
	WithCDC           bool     `json:"with_cdc"`
	CDCSink           string   `json:"cdc_sink,omitempty"`
	CheckpointBefore  bool     `json:"checkpoint_before_each_run"`
	// A pin counts toward right_edge_pin_share within RightEdgeFraction of
	// the index's blocks from its last block, and at least
	// RightEdgeMinBlocks; only leaf pages count.
	RightEdgeFraction  float64 `json:"right_edge_fraction"`
	RightEdgeMinBlocks int     `json:"right_edge_min_blocks"`
	// SyntheticClock: time-ordered keys took their milliseconds from a
	// clock stepping 1 ms every KeysPerMillisecond keys of a run.
	SyntheticClock     bool `json:"synthetic_clock"`
	KeysPerMillisecond int  `json:"keys_per_millisecond"`
	// TablePerRun: every run had a table created and seeded anew.
	TablePerRun   bool `json:"table_per_run"`
	KeepDisturbed bool `json:"keep_disturbed"`
	SelfCheck     bool `json:"self_check"`
}

// Skip is a strategy left out.
type Skip struct {
	Strategy string `json:"strategy"`
	Reason   string `json:"reason"`
}

// Latency is in milliseconds, per transaction.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// HotBlock is a PK-index leaf block that load backends pinned. Pins adds up the
// pinning_backends the samples saw (pins, not lock waits).
type HotBlock struct {
	Index    string `json:"index"`
	Block    int64  `json:"block"`
	Pins     int64  `json:"pins"`
	Samples  int    `json:"samples"`
	MaxBlock int64  `json:"max_block"`
}

// Lag is the replication lag while the load ran and after it stopped.
type Lag struct {
	PeakBytes      int64       `json:"peak_bytes"`
	PeakSeconds    float64     `json:"peak_seconds"`
	CatchupSeconds float64     `json:"catchup_seconds"`
	Samples        []LagSample `json:"samples"`
}

// LagSample is the lag at T seconds after the load started.
type LagSample struct {
	T       float64 `json:"t"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// Spread is the range of a figure over the kept runs.
type Spread struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Check is one sanity check.
type Check struct {
	Run    int    `json:"run"`
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// Sanity says whether the entry's numbers can be trusted.
type Sanity struct {
	Passed bool    `json:"passed"`
	Checks []Check `json:"checks"`
}

// Discard is a run left out of the medians.
type Discard struct {
	Run    int    `json:"run"`
	Reason string `json:"reason"`
}

// Entry is one strategy × workload × client count over n runs, each on a
// table of its own. Scalars, sizes included, are medians over the kept
// runs, with their ranges in Ranges; wait_events, hot_blocks and lag come
// from the run whose tps is the median, and Ranges also holds the median
// and range over the kept runs of its LWLock:BufferContent samples
// ("buffer_content_samples") and its lag ("lag.peak_bytes",
// "lag.peak_seconds", "lag.catchup_seconds"), which every run has in
// per_run.
type Entry struct {
	Strategy       string   `json:"strategy"`
	Workload       string   `json:"workload"`
	Clients        int      `json:"clients"`
	N              int      `json:"n"`
	TPS            float64  `json:"tps"`
	RowsPerSecond  float64  `json:"rows_per_second"`
	LatencyMS      Latency  `json:"latency_ms"`
	WALBytesPerRow float64  `json:"wal_bytes_per_row"`
	FPIPerRow      *float64 `json:"fpi_per_row"`
	// PagesWrittenPerRow is data pages written (up to a checkpoint right
	// after the load) per row written; 0 with NoCheckpoint.
	PagesWrittenPerRow float64          `json:"pages_written_per_row"`
	HeapBytes          int64            `json:"heap_bytes"`
	IndexBytes         int64            `json:"index_bytes"`
	BytesPerRow        float64          `json:"bytes_per_row"`
	HeapBytesPerRow    float64          `json:"heap_bytes_per_row"`
	TableRows          int64            `json:"table_rows"`
	AvgLeafDensity     float64          `json:"avg_leaf_density"`
	Fillfactor         int              `json:"fillfactor"`
	WaitEvents         map[string]int64 `json:"wait_events"`
	WaitSamples        int              `json:"wait_samples"`
	// BufferContentSamples is the median over the kept runs of the
	// LWLock:BufferContent samples of their load backends.
	BufferContentSamples float64    `json:"buffer_content_samples"`
	ForeignActive        int64      `json:"foreign_active_samples"`
	HotBlocks            []HotBlock `json:"hot_blocks"`
	RightEdgePinShare    float64    `json:"right_edge_pin_share"`
	Lag                  *Lag       `json:"lag,omitempty"`
	Spread               Spread     `json:"spread"`
	// Ranges holds the range over the kept runs of every median above, by
	// its JSON name.
	Ranges map[string]Spread `json:"ranges"`
	// MemoryRatio is (heap + PK index) / shared_buffers after the median run.
	MemoryRatio float64 `json:"memory_ratio"`
	// Disturbed lists kept runs that failed a guard (KeepDisturbed).
	Disturbed []Discard   `json:"disturbed,omitempty"`
	Sanity    Sanity      `json:"sanity"`
	Discarded []Discard   `json:"discarded,omitempty"`
	PerRun    []RunResult `json:"per_run"`
}

// RunResult is one run's raw numbers.
type RunResult struct {
	Run       int     `json:"run"`
	Kept      bool    `json:"kept"`
	Seconds   float64 `json:"seconds"`
	Txns      int64   `json:"txns"`
	Rows      int64   `json:"rows"`
	Errors    int64   `json:"errors"`
	TPS       float64 `json:"tps"`
	LatencyMS Latency `json:"latency_ms"`
	// WALStart and WALEnd are the window's insert positions; WALBytes is
	// their distance, page headers and alignment included.
	WALStart       string `json:"wal_start"`
	WALEnd         string `json:"wal_end"`
	WALBytes       int64  `json:"wal_bytes"`
	WALSource      string `json:"wal_source"`
	WALRecords     int64  `json:"wal_records,omitempty"`
	WALRecordBytes int64  `json:"wal_record_bytes,omitempty"`
	FPIBytes       int64  `json:"fpi_bytes,omitempty"`
	// ForeignWALBytes and ForeignFPI are the window's records that change
	// other databases (and their transactions' records): other sessions.
	ForeignWALBytes    int64    `json:"foreign_wal_bytes"`
	ForeignFPI         int64    `json:"foreign_fpi"`
	Checkpoints        int64    `json:"checkpoints_in_window"`
	AutovacuumSeen     []string `json:"autovacuum_seen,omitempty"`
	Disturbed          []string `json:"disturbed,omitempty"`
	walStats           walStats
	WALBytesPerRow     float64          `json:"wal_bytes_per_row"`
	FPI                *int64           `json:"fpi,omitempty"`
	PagesWritten       int64            `json:"pages_written"`
	PagesWrittenPerRow float64          `json:"pages_written_per_row"`
	FPIPerRow          *float64         `json:"fpi_per_row,omitempty"`
	HeapBytes          int64            `json:"heap_bytes"`
	IndexBytes         int64            `json:"index_bytes"`
	TableRows          int64            `json:"table_rows"`
	AvgLeafDensity     float64          `json:"avg_leaf_density"`
	WaitEvents         map[string]int64 `json:"wait_events,omitempty"`
	WaitSamples        int              `json:"wait_samples"`
	ForeignActive      int64            `json:"foreign_active_samples"`
	HotBlocks          []HotBlock       `json:"hot_blocks,omitempty"`
	RightEdgeShare     float64          `json:"right_edge_pin_share"`
	Lag                *Lag             `json:"lag,omitempty"`
	Checks             []Check          `json:"-"`
}
