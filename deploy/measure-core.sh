#!/usr/bin/env bash
# Benchmark ferry's core paths against the local stack (make stack-up):
#
#   1. catch-up: a backlog of BACKLOG_ROWS rows in 100-row transactions,
#      decoded by pg_recvlogical (the decoder's limit) and by
#      `ferry run --catch-up` (decode + load into ClickHouse);
#   2. initial load: LOAD_ROWS rows copied by `ferry run --catch-up`, against
#      a `psql \copy | clickhouse-client` shell pipeline.
#
# deploy/perf.sh (make perf) is the fuller harness: three catch-up shapes,
# steady-state latency and peak memory, written into docs/PERFORMANCE.md.
#
# Each is repeated RUNS times; the summary shows medians. Raw timings and
# logs go to .stack/measure/. This is a benchmark, not a test: it fails only
# when something breaks or ferry's copy is wrong.
#
# Environment: FERRY_PG_URL, FERRY_CH_URL (from .stack/env when present),
# RUNS (3), BACKLOG_ROWS (500000, a multiple of 100), LOAD_ROWS (1000000),
# FERRY (bin/ferry), PG_RECVLOGICAL (pg_recvlogical), CH_CLIENT
# (clickhouse-client), SKIP_CATCHUP=1 / SKIP_LOAD=1.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"

if [ -z "${FERRY_PG_URL:-}" ] && [ -f .stack/env ]; then
	# shellcheck source=/dev/null
	. .stack/env
fi
: "${FERRY_PG_URL:?FERRY_PG_URL is not set (run make stack-up, then . .stack/env)}"
: "${FERRY_CH_URL:?FERRY_CH_URL is not set (run make stack-up, then . .stack/env)}"

RUNS="${RUNS:-3}"
BACKLOG_ROWS="${BACKLOG_ROWS:-500000}"
LOAD_ROWS="${LOAD_ROWS:-1000000}"
FERRY="${FERRY:-bin/ferry}"
PG_RECVLOGICAL="${PG_RECVLOGICAL:-pg_recvlogical}"
CH_CLIENT="${CH_CLIENT:-clickhouse-client}"
OUT=".stack/measure"

DB_CU=ferry_measure
SLOT_CU=ferry_measure
SLOT_TWIN=ferry_measure_twin
SLOT_SQL=ferry_measure_twin_sql
DB_LOAD=ferry_measure_load
SLOT_LOAD=ferry_measure_load
PUB=ferry

if [ $((BACKLOG_ROWS % 100)) -ne 0 ]; then
	echo "BACKLOG_ROWS must be a multiple of 100" >&2
	exit 2
fi
[ -x "$FERRY" ] || { echo "$FERRY not found: run make build" >&2; exit 2; }
command -v "$PG_RECVLOGICAL" >/dev/null || { echo "$PG_RECVLOGICAL not on PATH (set PG_RECVLOGICAL)" >&2; exit 2; }
command -v "$CH_CLIENT" >/dev/null || { echo "$CH_CLIENT not on PATH (set CH_CLIENT)" >&2; exit 2; }
command -v psql >/dev/null || { echo "psql not on PATH" >&2; exit 2; }

mkdir -p "$OUT"
STAMP="$(date +%Y%m%d-%H%M%S)"
RAW="$OUT/raw-$STAMP.tsv"
LOGDIR="$OUT/logs-$STAMP"
mkdir -p "$LOGDIR"
printf 'phase\trun\twhat\trows\tseconds\trows_per_s\n' >"$RAW"

log() { printf '[measure %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# --- connection strings --------------------------------------------------

# pg_url DB: FERRY_PG_URL pointing at database DB.
pg_url() {
	local base="${FERRY_PG_URL%%\?*}" query=""
	case "$FERRY_PG_URL" in *\?*) query="?${FERRY_PG_URL#*\?}" ;; esac
	local rest="${base#*://}"
	case "$rest" in
	*/*) base="${base%/*}" ;;
	esac
	printf '%s/%s%s' "$base" "$1" "$query"
}

# ClickHouse host and port from FERRY_CH_URL (clickhouse://user@host:port/db).
ch_hostport="${FERRY_CH_URL#*://}"
ch_hostport="${ch_hostport%%/*}"
ch_hostport="${ch_hostport%%\?*}"
CH_USER=default
case "$ch_hostport" in *@*) CH_USER="${ch_hostport%%@*}"; ch_hostport="${ch_hostport#*@}" ;; esac
CH_USER="${CH_USER%%:*}"
CH_HOST="${ch_hostport%%:*}"
CH_PORT=9000
case "$ch_hostport" in *:*) CH_PORT="${ch_hostport##*:}" ;; esac

PG_ADMIN="$(pg_url postgres)"

pgq() { psql "$PG_ADMIN" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
pgdb() { local db="$1"; shift; psql "$(pg_url "$db")" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
chq() { "$CH_CLIENT" --host "$CH_HOST" --port "$CH_PORT" --user "$CH_USER" "$@"; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "inf" }'; }
# median of the arguments (numbers)
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RAW"; }

# --- cleanup -------------------------------------------------------------

BG_PIDS=()

drop_slot() {
	# A walsender still attached (a killed ferry takes a moment) keeps the
	# slot active; end it first.
	pgq -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$1' AND active_pid IS NOT NULL" >/dev/null || true
	local _
	for _ in $(seq 1 50); do
		if pgq -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$1'" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	log "warning: could not drop slot $1"
	return 1
}

drop_pg_db() { PGOPTIONS="-c client_min_messages=warning" pgq -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)"; }
drop_ch_db() { chq --query "DROP DATABASE IF EXISTS $1"; }

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	local p
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "$SLOT_CU" "$SLOT_TWIN" "$SLOT_SQL" "$SLOT_LOAD"; do drop_slot "$p" >/dev/null 2>&1; done
	for p in "$DB_CU" "$DB_LOAD"; do
		drop_pg_db "$p" >/dev/null 2>&1
		drop_ch_db "$p" >/dev/null 2>&1
	done
	if [ "$rc" -ne 0 ]; then
		log "failed (exit $rc); logs in $LOGDIR, raw timings in $RAW"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run_logged NAME CMD...: run CMD with stdout+stderr in LOGDIR/NAME.log;
# on failure show the log's tail and fail.
run_logged() {
	local name="$1"; shift
	if ! "$@" >"$LOGDIR/$name.log" 2>&1; then
		log "FAILED: $name: $(printf '%s ' "$@" | sed -E 's#(://[^:/@ ]+):[^@ ]*@#\1:xxxxx@#g')"
		tail -n 30 "$LOGDIR/$name.log" >&2
		return 1
	fi
}

# ferry_flags DB SLOT: sets FLAGS to ferry's connection and table flags.
FLAGS=()
ferry_flags() {
	FLAGS=(--pg "$(pg_url "$1")" --ch "$FERRY_CH_URL" --ch-database "$1"
		--slot "$2" --publication "$PUB" --tables public.orders)
}

# --- machine -------------------------------------------------------------

PG_VERSION="$(pgq -c "SHOW server_version")"
CH_VERSION="$(chq --query "SELECT version()")"
NPROC="$(nproc)"
MEM_GB="$(free -g | awk '/^Mem:/ { print $2 }')"
LOADAVG_START="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")"
if git diff --quiet HEAD -- 2>/dev/null && [ -z "$(git status --porcelain --untracked-files=normal -- . ':!.stack' 2>/dev/null)" ]; then
	FERRY_REV="$(git describe --always --tags --dirty 2>/dev/null || echo unknown)"
else
	FERRY_REV="uncommitted (on $(git describe --always --tags 2>/dev/null || echo unknown))"
fi
log "machine: $NPROC CPUs, ${MEM_GB} GiB; PostgreSQL $PG_VERSION; ClickHouse $CH_VERSION; ferry $FERRY_REV"
log "raw timings: $RAW"

# Leftovers of an earlier, killed run.
for s in "$SLOT_CU" "$SLOT_TWIN" "$SLOT_SQL" "$SLOT_LOAD"; do drop_slot "$s" >/dev/null 2>&1 || true; done

# --- 1. catch-up ---------------------------------------------------------

CU_RECV=()
CU_FERRY=()
CU_RATIO=()
CU_SQL=()
CU_RATIO_SQL=()

catchup_run() {
	local run="$1" url
	url="$(pg_url "$DB_CU")"
	log "catch-up run $run/$RUNS: fresh $DB_CU"
	drop_slot "$SLOT_CU" >/dev/null 2>&1 || true
	drop_slot "$SLOT_TWIN" >/dev/null 2>&1 || true
	drop_slot "$SLOT_SQL" >/dev/null 2>&1 || true
	drop_pg_db "$DB_CU"
	drop_ch_db "$DB_CU"
	pgq -c "CREATE DATABASE $DB_CU"
	pgdb "$DB_CU" <<-'SQL'
		CREATE TABLE orders (
			id bigserial PRIMARY KEY,
			customer_id bigint NOT NULL,
			total numeric(10,2) NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now()
		);
		CREATE PROCEDURE measure_backlog(n int) LANGUAGE plpgsql AS $$
		BEGIN
			FOR i IN 1..n LOOP
				INSERT INTO orders (customer_id, total)
				SELECT (random() * 10000)::int, (random() * 1000)::numeric(10,2)
				FROM generate_series(1, 100);
				COMMIT;
			END LOOP;
		END $$;
	SQL
	# First start on the empty table: slot, publication, ClickHouse table.
	ferry_flags "$DB_CU" "$SLOT_CU"
	run_logged "catchup-$run-first" "$FERRY" --log-level info run "${FLAGS[@]}" --catch-up
	# Twin slots at (about) the same point, before the backlog: one for
	# pg_recvlogical, one for the SQL decoding function.
	pgdb "$DB_CU" -c "SELECT pg_create_logical_replication_slot('$SLOT_TWIN', 'pgoutput')" >/dev/null
	pgdb "$DB_CU" -c "SELECT pg_create_logical_replication_slot('$SLOT_SQL', 'pgoutput')" >/dev/null

	log "  writing $BACKLOG_ROWS rows in 100-row transactions (ferry stopped)"
	local t0 t1
	t0="$(now)"
	pgdb "$DB_CU" -c "CALL measure_backlog($((BACKLOG_ROWS / 100)))"
	t1="$(now)"
	record catchup "$run" write_backlog "$BACKLOG_ROWS" "$(elapsed "$t0" "$t1")" "$(rate "$BACKLOG_ROWS" "$(elapsed "$t0" "$t1")")"
	local end_lsn
	end_lsn="$(pgdb "$DB_CU" -c "SELECT pg_current_wal_lsn()")"
	# Nudge the WAL past end_lsn from another database so a decoder waiting
	# for a record at or after end_lsn sees one.
	pgq -c "SELECT pg_logical_emit_message(false, 'ferry_measure', 'end')" >/dev/null
	log "  backlog written in $(elapsed "$t0" "$t1")s; end LSN $end_lsn"
	# Settle before timing: autovacuum would otherwise start on the new
	# rows while the decoders run, and a checkpoint would come due.
	pgdb "$DB_CU" -c "VACUUM (ANALYZE) orders" -c "CHECKPOINT" >/dev/null

	# (a) the decoder alone, streamed to a client: pg_recvlogical.
	local secs_recv
	t0="$(now)"
	if ! timeout 600 "$PG_RECVLOGICAL" -d "$url" --slot "$SLOT_TWIN" --start \
		-o proto_version=1 -o publication_names="$PUB" --no-loop -E "$end_lsn" -f /dev/null \
		>"$LOGDIR/catchup-$run-recvlogical.log" 2>&1; then
		log "FAILED: pg_recvlogical did not end by itself at $end_lsn"
		tail -n 20 "$LOGDIR/catchup-$run-recvlogical.log" >&2
		return 1
	fi
	t1="$(now)"
	secs_recv="$(elapsed "$t0" "$t1")"
	record catchup "$run" pg_recvlogical "$BACKLOG_ROWS" "$secs_recv" "$(rate "$BACKLOG_ROWS" "$secs_recv")"
	log "  pg_recvlogical: ${secs_recv}s"

	# (a') the decoder inside the server, no client: the SQL function.
	local secs_sql msgs
	t0="$(now)"
	msgs="$(pgdb "$DB_CU" -c "SELECT count(*) FROM pg_logical_slot_get_binary_changes('$SLOT_SQL', '$end_lsn', NULL, 'proto_version', '1', 'publication_names', '$PUB')")"
	t1="$(now)"
	secs_sql="$(elapsed "$t0" "$t1")"
	record catchup "$run" pg_logical_slot_get_binary_changes "$BACKLOG_ROWS" "$secs_sql" "$(rate "$BACKLOG_ROWS" "$secs_sql")"
	log "  pg_logical_slot_get_binary_changes: ${secs_sql}s ($msgs messages)"

	# (b) ferry: decode + load.
	local secs_ferry
	t0="$(now)"
	ferry_flags "$DB_CU" "$SLOT_CU"
	run_logged "catchup-$run-ferry" "$FERRY" --log-level info run "${FLAGS[@]}" --catch-up
	t1="$(now)"
	secs_ferry="$(elapsed "$t0" "$t1")"
	record catchup "$run" ferry_catch_up "$BACKLOG_ROWS" "$secs_ferry" "$(rate "$BACKLOG_ROWS" "$secs_ferry")"
	log "  ferry run --catch-up: ${secs_ferry}s"

	# Correctness.
	local n
	n="$(sed -n 's/.*caught up.*"rows": *\([0-9]*\).*/\1/p' "$LOGDIR/catchup-$run-ferry.log" | tail -n 1)"
	if [ -n "$n" ] && [ "$n" != "$BACKLOG_ROWS" ]; then
		log "note: ferry's caught-up line counts $n rows, the backlog is $BACKLOG_ROWS"
	fi
	n="$(chq --query "SELECT count() FROM $DB_CU.orders FINAL WHERE _ferry_deleted = 0")"
	if [ "$n" != "$BACKLOG_ROWS" ]; then
		log "WRONG: $DB_CU.orders holds $n live rows in ClickHouse, want $BACKLOG_ROWS"
		return 1
	fi
	ferry_flags "$DB_CU" "$SLOT_CU"
	run_logged "catchup-$run-verify" "$FERRY" --log-level warn verify "${FLAGS[@]}"
	log "  correct: $n rows; $(tail -n 1 "$LOGDIR/catchup-$run-verify.log")"

	CU_RECV+=("$secs_recv")
	CU_SQL+=("$secs_sql")
	CU_RATIO_SQL+=("$(awk -v f="$secs_ferry" -v r="$secs_sql" 'BEGIN { printf "%.2f", f / r }')")
	CU_FERRY+=("$secs_ferry")
	CU_RATIO+=("$(awk -v f="$secs_ferry" -v r="$secs_recv" 'BEGIN { printf "%.2f", f / r }')")
	drop_slot "$SLOT_TWIN" >/dev/null
	drop_slot "$SLOT_SQL" >/dev/null
	drop_slot "$SLOT_CU" >/dev/null
}

if [ "${SKIP_CATCHUP:-0}" != 1 ]; then
	for run in $(seq 1 "$RUNS"); do catchup_run "$run"; done
	drop_pg_db "$DB_CU"
	drop_ch_db "$DB_CU"
fi

# --- 2. initial load -----------------------------------------------------

LD_FERRY=()
LD_FERRY_LOG=()
LD_SHELL=()

if [ "${SKIP_LOAD:-0}" != 1 ]; then
	log "initial load: $LOAD_ROWS rows into fresh $DB_LOAD"
	drop_slot "$SLOT_LOAD" >/dev/null 2>&1 || true
	drop_pg_db "$DB_LOAD"
	drop_ch_db "$DB_LOAD"
	pgq -c "CREATE DATABASE $DB_LOAD"
	pgdb "$DB_LOAD" <<-SQL
		CREATE TABLE orders (
			id bigserial PRIMARY KEY,
			customer_id bigint NOT NULL,
			total numeric(10,2) NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now(),
			note text NOT NULL
		);
		INSERT INTO orders (customer_id, total, created_at, note)
		SELECT (random() * 10000)::int, (random() * 1000)::numeric(10,2),
			now() - g * interval '1 second',
			repeat(md5(g::text), 6) || left(md5(g::text), 8)
		FROM generate_series(1, $LOAD_ROWS) g;
		VACUUM (FREEZE, ANALYZE) orders;
	SQL
	log "  table size: $(pgdb "$DB_LOAD" -c "SELECT pg_size_pretty(pg_table_size('orders'))")"

	for run in $(seq 1 "$RUNS"); do
		log "initial load run $run/$RUNS"
		# ferry: a first start (no slot, no ClickHouse database).
		drop_slot "$SLOT_LOAD" >/dev/null 2>&1 || true
		drop_ch_db "$DB_LOAD"
		ferry_flags "$DB_LOAD" "$SLOT_LOAD"
		t0="$(now)"
		run_logged "load-$run-ferry" "$FERRY" --log-level info --log-format json run "${FLAGS[@]}" --catch-up
		t1="$(now)"
		secs="$(elapsed "$t0" "$t1")"
		rps_log="$(grep '"copied table"' "$LOGDIR/load-$run-ferry.log" | sed -n 's/.*"rows_per_s":\([0-9.e+]*\).*/\1/p' | head -n 1)"
		rows_log="$(grep '"copied table"' "$LOGDIR/load-$run-ferry.log" | sed -n 's/.*"rows":\([0-9]*\).*/\1/p' | head -n 1)"
		rps_log="$(awk -v v="${rps_log:-0}" 'BEGIN { printf "%.0f", v }')"
		if [ "${rows_log:-}" != "$LOAD_ROWS" ]; then
			log "WRONG: ferry's copied-table line says rows=${rows_log:-?}, want $LOAD_ROWS"
			exit 1
		fi
		n="$(chq --query "SELECT count() FROM $DB_LOAD.orders FINAL WHERE _ferry_deleted = 0")"
		if [ "$n" != "$LOAD_ROWS" ]; then
			log "WRONG: $DB_LOAD.orders holds $n live rows in ClickHouse, want $LOAD_ROWS"
			exit 1
		fi
		record load "$run" ferry_catch_up "$LOAD_ROWS" "$secs" "$(rate "$LOAD_ROWS" "$secs")"
		record load "$run" ferry_copied_table_log "$LOAD_ROWS" "" "$rps_log"
		log "  ferry run --catch-up: ${secs}s (copied table: $rps_log rows/s)"
		LD_FERRY+=("$secs")
		LD_FERRY_LOG+=("$rps_log")
		drop_slot "$SLOT_LOAD" >/dev/null

		# The shell pipeline into a plain MergeTree table.
		chq --query "CREATE DATABASE IF NOT EXISTS $DB_LOAD"
		chq --query "DROP TABLE IF EXISTS $DB_LOAD.orders_shell"
		chq --query "CREATE TABLE $DB_LOAD.orders_shell (id Int64, customer_id Int64, total Decimal(10, 2), created_at String, note String) ENGINE = MergeTree ORDER BY id"
		t0="$(now)"
		psql "$(pg_url "$DB_LOAD")" -X -v ON_ERROR_STOP=1 -qAt -c '\copy orders (id, customer_id, total, created_at, note) to stdout' |
			chq --query "INSERT INTO $DB_LOAD.orders_shell (id, customer_id, total, created_at, note) FORMAT TSV"
		t1="$(now)"
		secs="$(elapsed "$t0" "$t1")"
		n="$(chq --query "SELECT count() FROM $DB_LOAD.orders_shell")"
		if [ "$n" != "$LOAD_ROWS" ]; then
			log "shell pipeline loaded $n rows, want $LOAD_ROWS"
			exit 1
		fi
		record load "$run" shell_copy_pipe "$LOAD_ROWS" "$secs" "$(rate "$LOAD_ROWS" "$secs")"
		log "  psql \\copy | clickhouse-client: ${secs}s"
		LD_SHELL+=("$secs")
	done
	# verify once, on the last copy
	ferry_flags "$DB_LOAD" "$SLOT_LOAD"
	run_logged "load-verify" "$FERRY" --log-level warn verify "${FLAGS[@]}"
	log "  verify: $(tail -n 1 "$LOGDIR/load-verify.log")"
	drop_pg_db "$DB_LOAD"
	drop_ch_db "$DB_LOAD"
fi

# --- summary -------------------------------------------------------------

join() { local IFS=", "; printf '%s' "$*" | sed 's/,/, /g'; }
rates() { local n="$1" s out=(); shift; for s in "$@"; do out+=("$(rate "$n" "$s")"); done; join "${out[@]}"; }

{
	echo
	echo "## ferry core measurements ($(date -u +%Y-%m-%dT%H:%MZ))"
	echo
	echo "Machine: $NPROC CPUs, ${MEM_GB} GiB RAM; PostgreSQL $PG_VERSION; ClickHouse $CH_VERSION; ferry $FERRY_REV; RUNS=$RUNS; load average at start $LOADAVG_START, at end $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")."
	echo
	echo "| measurement | rows | median s | median rows/s | runs (s) |"
	echo "|---|---:|---:|---:|---|"
	if [ "${#CU_FERRY[@]}" -gt 0 ]; then
		m="$(median "${CU_RECV[@]}")"
		echo "| catch-up: pg_recvlogical (pgoutput, -E end, to /dev/null) | $BACKLOG_ROWS | $m | $(rate "$BACKLOG_ROWS" "$m") | $(join "${CU_RECV[@]}") |"
		m="$(median "${CU_SQL[@]}")"
		echo "| catch-up: SELECT count(*) FROM pg_logical_slot_get_binary_changes (pgoutput, in-server) | $BACKLOG_ROWS | $m | $(rate "$BACKLOG_ROWS" "$m") | $(join "${CU_SQL[@]}") |"
		m="$(median "${CU_FERRY[@]}")"
		echo "| catch-up: ferry run --catch-up | $BACKLOG_ROWS | $m | $(rate "$BACKLOG_ROWS" "$m") | $(join "${CU_FERRY[@]}") |"
		echo "| catch-up: time ratio ferry / pg_recvlogical | | $(median "${CU_RATIO[@]}") | | $(join "${CU_RATIO[@]}") |"
		echo "| catch-up: time ratio ferry / SQL decoding function | | $(median "${CU_RATIO_SQL[@]}") | | $(join "${CU_RATIO_SQL[@]}") |"
	fi
	if [ "${#LD_FERRY[@]}" -gt 0 ]; then
		m="$(median "${LD_FERRY[@]}")"
		echo "| initial load: ferry run --catch-up (start to exit) | $LOAD_ROWS | $m | $(rate "$LOAD_ROWS" "$m") | $(join "${LD_FERRY[@]}") |"
		echo "| initial load: ferry \"copied table\" rows_per_s | $LOAD_ROWS | | $(median "${LD_FERRY_LOG[@]}") | $(join "${LD_FERRY_LOG[@]}") rows/s |"
		m="$(median "${LD_SHELL[@]}")"
		echo "| initial load: psql \\copy \\| clickhouse-client (TSV, created_at as String) | $LOAD_ROWS | $m | $(rate "$LOAD_ROWS" "$m") | $(join "${LD_SHELL[@]}") |"
		echo "| initial load: ferry / shell time ratio | | $(awk -v f="$(median "${LD_FERRY[@]}")" -v s="$m" 'BEGIN { printf "%.2f", f / s }') | | |"
	fi
	echo
	echo "Catch-up backlog: $((BACKLOG_ROWS / 100)) transactions of 100 inserts into orders(id bigserial, customer_id bigint, total numeric(10,2), created_at timestamptz), written while ferry was stopped; both decoders read it from slots created at the same point. pg_recvlogical makes two write() calls per message (data, newline), so it measures the client more than the decoder; the SQL function is the in-server decoding limit. Correctness: count() FINAL of live rows and ferry verify after every catch-up run and after the last load."
	echo "Initial load table: the same shape plus note text (200 bytes). The shell pipeline's ClickHouse table is a plain MergeTree with created_at String (ClickHouse 18.16's DateTime cannot hold timestamptz losslessly)."
	echo "Raw timings: $RAW"
} | tee "$OUT/summary-$STAMP.md"
