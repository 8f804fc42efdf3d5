# Helpers of deploy/perf.sh (sourced): connection strings, queries, timing
# and peak memory of a command, slots and databases, medians.
# shellcheck shell=bash

if [ -z "${FERRY_PG_URL:-}" ] && [ -f .stack/env ]; then
	# shellcheck source=/dev/null
	. .stack/env
fi
: "${FERRY_PG_URL:?FERRY_PG_URL is not set (run make stack-up, then . .stack/env)}"
: "${FERRY_CH_URL:?FERRY_CH_URL is not set (run make stack-up, then . .stack/env)}"

# The PostgreSQL client tools of the stack's server, when not on PATH.
for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/16/bin /usr/lib/postgresql/17/bin; do
	if ! command -v pg_recvlogical >/dev/null && [ -x "$d/pg_recvlogical" ]; then PATH="$PATH:$d"; fi
done

log() { printf '[perf %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
redact() { sed -E 's#(://[^:/@ ]+):[^@ ]*@#\1:xxxxx@#g'; }

# pg_url DB: FERRY_PG_URL pointing at database DB.
pg_url() {
	local base="${FERRY_PG_URL%%\?*}" query=""
	case "$FERRY_PG_URL" in *\?*) query="?${FERRY_PG_URL#*\?}" ;; esac
	local rest="${base#*://}"
	case "$rest" in */*) base="${base%/*}" ;; esac
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
CH_CLIENT="${CH_CLIENT:-clickhouse-client}"

PG_ADMIN="$(pg_url postgres)"
pgq() { psql "$PG_ADMIN" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
pgdb() { local db="$1"; shift; psql "$(pg_url "$db")" -X -v ON_ERROR_STOP=1 -qAt "$@"; }
chq() { "$CH_CLIENT" --host "$CH_HOST" --port "$CH_PORT" --user "$CH_USER" "$@"; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "inf" }'; }
per_million() { awk -v c="$1" -v n="$2" 'BEGIN { if (n > 0 && c != "") printf "%.2f", c * 1000000 / n; else print "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "inf" }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
join() { local v IFS=" "; read -ra v <<<"$*"; IFS=","; printf '%s' "${v[*]}" | sed 's/,/, /g'; }

# drop_slot NAME: end a walsender still attached (a stopped ferry takes a
# moment), then drop the slot.
drop_slot() {
	pgq -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$1' AND active_pid IS NOT NULL" >/dev/null 2>&1 || true
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

# run_logged NAME CMD...: run CMD with its output in LOGDIR/NAME.log; on
# failure show the log's tail and fail.
run_logged() {
	local name="$1"; shift
	if ! "$@" >"$LOGDIR/$name.log" 2>&1; then
		log "FAILED: $name: $(printf '%s ' "$@" | redact)"
		tail -n 30 "$LOGDIR/$name.log" | redact >&2
		return 1
	fi
}

# measured NAME CMD...: run_logged, setting SECS to the wall time,
# RSS_MB to the peak resident memory, CPU_S to the CPU-seconds (user +
# system, getrusage of the process) it used and SYS_S to the system part
# (GNU time, GNU_TIME or /usr/bin/time, when installed, else a sampler of
# VmHWM in /proc/PID/status every 20 ms, and no CPU figure).
# shellcheck disable=SC2034 # read by the scripts that source this one
SECS="" RSS_MB="" CPU_S="" SYS_S=""
measured() {
	local name="$1"; shift
	local t0 t1 rc=0
	t0="$(now)"
	if [ -x "${GNU_TIME:-/usr/bin/time}" ]; then
		"${GNU_TIME:-/usr/bin/time}" -f '%M %U %S' -o "$LOGDIR/$name.rss" "$@" >"$LOGDIR/$name.log" 2>&1 || rc=$?
		t1="$(now)"
		RSS_MB="$(awk '/^[0-9]+ [0-9.]+ [0-9.]+$/ { printf "%.0f", $1 / 1024 }' "$LOGDIR/$name.rss")"
		CPU_S="$(awk '/^[0-9]+ [0-9.]+ [0-9.]+$/ { printf "%.2f", $2 + $3 }' "$LOGDIR/$name.rss")"
		SYS_S="$(awk '/^[0-9]+ [0-9.]+ [0-9.]+$/ { printf "%.2f", $3 }' "$LOGDIR/$name.rss")"
	else
		"$@" >"$LOGDIR/$name.log" 2>&1 &
		local pid=$! peak=0 kb
		while kill -0 "$pid" 2>/dev/null; do
			kb="$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)"
			if [ -n "$kb" ] && [ "$kb" -gt "$peak" ]; then peak="$kb"; fi
			sleep 0.02
		done
		wait "$pid" || rc=$?
		t1="$(now)"
		RSS_MB="$(awk -v k="$peak" 'BEGIN { printf "%.0f", k / 1024 }')"
		CPU_S="" SYS_S="" # not known without GNU time
	fi
	SECS="$(elapsed "$t0" "$t1")"
	if [ "$rc" -ne 0 ]; then
		log "FAILED: $name (exit $rc): $(printf '%s ' "$@" | redact)"
		tail -n 30 "$LOGDIR/$name.log" | redact >&2
		return 1
	fi
}

# live_rows DB TABLE: rows ClickHouse holds, after replacing and deletes.
live_rows() { chq --query "SELECT count() FROM $1.$2 FINAL WHERE _ferry_deleted = 0"; }

# CPU_PARTS names parts of ferry's work and the functions that make each
# up (a regular expression over a stack's frames; parts may nest, as
# allocation runs inside parsing and conversion).
CPU_PARTS='reading from PostgreSQL (pgconn, pgproto3)|pgconn\.|pgproto3\.
parsing pgoutput (pglogrepl, parseRowChange)|pglogrepl\.|parseRowChange
converting values (relation.value: schema.ColumnMap.Convert or AppendBinary)|\(\*relation\)\.value$|ColumnMap\)?\.Convert
batching rows (loader.Batcher.Add)|Batcher\)\.Add
encoding and sending to ClickHouse (clickhouse-go, ch-go)|ClickHouse/(clickhouse-go|ch-go)
allocating (runtime.mallocgc)|runtime\.mallocgc
garbage collection in the background|gcBgMarkWorker
Go scheduler and netpoller|runtime\.(schedule|findRunnable)'

# cpu_shares PROFILE: each of CPU_PARTS's share of ferry's CPU samples in
# PROFILE, as "part N%; part N%; ...".
cpu_shares() {
	local prof="$1" out="" name re pct
	while IFS='|' read -r name re; do
		pct="$(go tool pprof -top -nodecount=100000 -focus="$re" "$FERRY" "$prof" 2>/dev/null |
			sed -n 's/^Showing nodes accounting for [^,]*, \([0-9.]*\)% of .*/\1/p')"
		out+="${out:+; }$name $(awk -v p="${pct:-0}" 'BEGIN { printf "%.0f", p }') %"
	done <<<"$CPU_PARTS"
	printf '%s' "$out"
}
