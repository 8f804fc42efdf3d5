#!/usr/bin/env bash
# ferry's performance harness (make perf), on the local stack (make stack-up):
#
#   1. catch-up: a backlog of BACKLOG_ROWS rows written while ferry is
#      stopped, in three shapes (one transaction; 100-row transactions;
#      single-row transactions), read by pg_recvlogical (pgoutput, a twin
#      slot created at the same point, to /dev/null) and by
#      `ferry run --catch-up` (decode and load into ClickHouse);
#   2. initial load of LOAD_ROWS rows (orders plus a 200-byte text column):
#      ferry's first start against `psql \copy | clickhouse-client`;
#   3. steady state: deploy/perfload writes STEADY_RATE rows/s in 100-row
#      transactions for STEADY_SECS while ferry streams; commit-to-visible
#      latency in ClickHouse, p50 and p99;
#   4. resync beside the stream: the steady state's load on one table while
#      `ferry resync` copies another of LOAD_ROWS rows afresh;
#   5. peak RSS of ferry in every run above, and in the catch-up of one
#      transaction of BIGTXN_ROWS rows;
#   6. the knee: the steady state once at each of KNEE_RATES, for
#      KNEE_SECS, until p99 reaches 1 s; the highest rate below it, and
#      docs/perf-knee.svg (p99 against rows/s, both legs) drawn by
#      deploy/perfplot from docs/perf-knee-<leg>.tsv.
#
# Each is repeated RUNS times; the report shows medians and every run. It
# replaces the part of PERF_DOC (docs/PERFORMANCE.md) between the
# perf:begin and perf:end markers and keeps the rest. Logs and raw figures
# go to .stack/perf/. This is a benchmark, not a test: it fails only when
# something breaks or ClickHouse ends up with other rows than PostgreSQL.
#
# Environment: RUNS (3); QUICK=1 (a smoke run: 50k/100k/100k rows, 10 s of
# steady state, RUNS=1); BACKLOG_ROWS (500000, a multiple of 100);
# LOAD_ROWS (1000000); BIGTXN_ROWS (1000000); STEADY_RATE (10000);
# CATCHUP_SHAPES ("one txn100 single"); STEADY_SECS (60); KNEE_RATES ("5000 10000 20000 40000 60000 80000 100000
# 120000 160000"); KNEE_SECS (60); SECTIONS ("catchup load steady resync bigtxn
# knee"); COPY_WORKERS
# BATCH_AGE and BATCH_QUIET (ferry's defaults); PERF_LEG (the report's section:
# modern or legacy; make perf sets it); PERF_DOC; FERRY (bin/ferry);
# CH_CLIENT.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
# shellcheck source=deploy/perf-lib.sh
. deploy/perf-lib.sh

if [ "${QUICK:-0}" = 1 ]; then
	RUNS="${RUNS:-1}" BACKLOG_ROWS="${BACKLOG_ROWS:-50000}" LOAD_ROWS="${LOAD_ROWS:-100000}"
	BIGTXN_ROWS="${BIGTXN_ROWS:-100000}" STEADY_SECS="${STEADY_SECS:-10}"
	KNEE_RATES="${KNEE_RATES:-5000 20000}" KNEE_SECS="${KNEE_SECS:-10}"
fi
RUNS="${RUNS:-3}"
BACKLOG_ROWS="${BACKLOG_ROWS:-500000}"
LOAD_ROWS="${LOAD_ROWS:-1000000}"
BIGTXN_ROWS="${BIGTXN_ROWS:-1000000}"
STEADY_RATE="${STEADY_RATE:-10000}"
STEADY_SECS="${STEADY_SECS:-60}"
KNEE_RATES="${KNEE_RATES:-5000 10000 20000 40000 60000 80000 100000 120000 160000}"
KNEE_SECS="${KNEE_SECS:-60}"
SECTIONS="${SECTIONS:-catchup load steady resync bigtxn knee}"
FERRY="${FERRY:-bin/ferry}"
PERFLOAD=bin/perfload
DOC="${PERF_DOC:-docs/PERFORMANCE.md}"
OUT=.stack/perf

DB_CU=ferry_perf_cu DB_LOAD=ferry_perf_load DB_ST=ferry_perf_steady DB_RS=ferry_perf_resync
SLOT=ferry_perf SLOT_TWIN=ferry_perf_twin SLOT_DEC=ferry_perf_decoder
PUB=ferry

if [ $((BACKLOG_ROWS % 100)) -ne 0 ]; then echo "BACKLOG_ROWS must be a multiple of 100" >&2; exit 2; fi
[ -x "$FERRY" ] || { echo "$FERRY not found: run make build" >&2; exit 2; }
for c in pg_recvlogical psql "$CH_CLIENT"; do
	command -v "$c" >/dev/null || { echo "$c not found (PostgreSQL 15 client tools, clickhouse-client)" >&2; exit 2; }
done
go build -o "$PERFLOAD" ./deploy/perfload
go build -o bin/perfplot ./deploy/perfplot

mkdir -p "$OUT"
STAMP="$(date +%Y%m%d-%H%M%S)"
LOGDIR="$OUT/logs-$STAMP"
RAW="$OUT/raw-$STAMP.tsv"
mkdir -p "$LOGDIR"
printf 'section\tshape\trun\twhat\trows\tseconds\trows_per_s\tpeak_rss_mb\n' >"$RAW"
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RAW"; }

# Results: R[key] holds one figure per run, space-separated.
declare -A R
declare -A CPU_SHARES # by catch-up tag: where ferry's CPU went in its last run
KNEE_ROWS=()
add() { R[$1]="${R[$1]:-} $2"; }
get() { printf '%s' "${R[$1]:-}"; }

BG_PIDS=()
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	local p
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "$SLOT" "$SLOT_TWIN" "$SLOT_DEC"; do drop_slot "$p" >/dev/null 2>&1; done
	for p in "$DB_CU" "$DB_LOAD" "$DB_ST" "$DB_RS"; do
		drop_pg_db "$p" >/dev/null 2>&1
		drop_ch_db "$p" >/dev/null 2>&1
	done
	[ "$rc" -ne 0 ] && log "failed (exit $rc); logs in $LOGDIR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ferry_flags DB: FLAGS for ferry on database DB's orders table, and RUNX
# for ferry run alone.
FLAGS=()
RUNX=(--metrics-addr "")
if [ -n "${COPY_WORKERS:-}" ]; then RUNX+=(--copy-workers "$COPY_WORKERS"); fi
if [ -n "${BATCH_AGE:-}" ]; then RUNX+=(--batch-age "$BATCH_AGE"); fi
if [ -n "${BATCH_QUIET:-}" ]; then RUNX+=(--batch-quiet "$BATCH_QUIET"); fi
ferry_flags() {
	FLAGS=(--pg "$(pg_url "$1")" --ch "$FERRY_CH_URL" --ch-database "$1" --slot "$SLOT"
		--publication "$PUB" --tables "${2:-public.orders}")
}

# fresh_db DB: empty PostgreSQL and ClickHouse databases named DB.
fresh_db() {
	drop_slot "$SLOT" >/dev/null 2>&1 || true
	drop_slot "$SLOT_TWIN" >/dev/null 2>&1 || true
	drop_slot "$SLOT_DEC" >/dev/null 2>&1 || true
	drop_pg_db "$1"
	drop_ch_db "$1"
	pgq -c "CREATE DATABASE $1"
}

# shellcheck source=deploy/perf-catchup.sh
. deploy/perf-catchup.sh
# shellcheck source=deploy/perf-report.sh
. deploy/perf-report.sh

for s in "$SLOT" "$SLOT_TWIN" "$SLOT_DEC"; do drop_slot "$s" >/dev/null 2>&1 || true; done
machine_facts
log "machine: $MACHINE"
log "logs: $LOGDIR"
for section in $SECTIONS; do
	case "$section" in
	catchup)
		for shape in ${CATCHUP_SHAPES:-one txn100 single}; do
			for run in $(seq 1 "$RUNS"); do catchup_run "$shape" "$BACKLOG_ROWS" "$run" "$shape"; done
		done ;;
	load) load_section ;;
	steady) for run in $(seq 1 "$RUNS"); do steady_run "$run"; done ;;
	resync) for run in $(seq 1 "$RUNS"); do resync_run "$run"; done ;;
	bigtxn) for run in $(seq 1 "$RUNS"); do catchup_run one "$BIGTXN_ROWS" "$run" bigtxn; done ;;
	knee) knee_section ;;
	*) echo "unknown section $section (want catchup, load, steady, resync, bigtxn, knee)" >&2; exit 2 ;;
	esac
done
write_report
