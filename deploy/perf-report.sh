# The report of deploy/perf.sh (sourced): the machine, and the figures in
# R as markdown between the markers of PERF_DOC.
# shellcheck shell=bash

# LEG_TAG names the leg in the report's markers.
LEG_TAG="${PERF_LEG:+ $PERF_LEG}"

machine_facts() {
	local cpu mem rev
	cpu="$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo "?")"
	mem="$(free -g | awk '/^Mem:/ { print $2 }')"
	PG_VERSION="$(pgq -c "SHOW server_version")"
	CH_VERSION="$(chq --query "SELECT version()")"
	GO_VERSION="$(go env GOVERSION 2>/dev/null || echo "?")"
	# Only the build's sources count: a run over both servers rewrites
	# docs/PERFORMANCE.md after the first leg, which is not the build.
	if [ -z "$(git status --porcelain --untracked-files=normal -- . ':!.stack' ':!docs' 2>/dev/null)" ]; then
		rev="$(git describe --always --tags 2>/dev/null || echo unknown)"
	else
		rev="uncommitted changes on $(git describe --always --tags 2>/dev/null || echo unknown)"
	fi
	FERRY_REV="$rev"
	MACHINE="$(nproc) CPUs ($cpu), ${mem} GiB RAM, Linux $(uname -r)"
	LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
}

# row_of KEY: "median (run, run, ...)" of R[KEY].
row_of() {
	local v
	read -ra v <<<"${R[$1]:-}"
	if [ "${#v[@]}" -eq 0 ]; then printf -- '-'; return; fi
	printf '%s (%s)' "$(median "${v[@]}")" "$(join "${v[@]}")"
}
med() {
	local v
	read -ra v <<<"${R[$1]:-}"
	median "${v[@]}"
}
maxof() { local v; read -ra v <<<"${R[$1]:-}"; printf '%s\n' "${v[@]}" | sort -g | tail -n 1; }

report_catchup() {
	echo "### Catch-up: $BACKLOG_ROWS rows written while ferry was stopped"
	echo
	echo "Medians of $RUNS runs, every run in brackets. Time ratio = ferry's time / pg_recvlogical's. Decoder ratio = the in-server decoder's time / ferry's (target: at least 0.5)."
	echo
	echo "| shape | in-server decoder s | pg_recvlogical s | ferry run --catch-up s | ferry rows/s | decoder ratio | time ratio | ferry CPU-s | ferry CPU-s per 1M rows | ferry peak RSS MB |"
	echo "|---|---|---|---|---:|---|---|---|---|---|"
	local shape label
	for shape in one txn100 single; do
		[ -n "$(get "$shape:ferry")" ] || continue
		case "$shape" in
		one) label="one transaction" ;;
		txn100) label="100-row transactions" ;;
		single) label="single-row transactions" ;;
		esac
		echo "| $label | $(row_of "$shape:dec") | $(row_of "$shape:recv") | $(row_of "$shape:ferry") | $(rate "$BACKLOG_ROWS" "$(med "$shape:ferry")") | $(row_of "$shape:decratio") | $(row_of "$shape:ratio") | $(row_of "$shape:cpu") | $(row_of "$shape:cpum") | $(row_of "$shape:rss") |"
	done
	echo
	if [ "${#CPU_SHARES[@]}" -gt 0 ]; then
		echo "Where ferry's CPU went, from a CPU profile of the last run of each shape (\`FERRY_CPUPROFILE\`): the share of samples whose stack holds each part; parts nest (allocation runs inside parsing and conversion), so they need not add up to 100 %."
		echo
		echo "| shape | where the CPU went |"
		echo "|---|---|"
		for shape in one txn100 single bigtxn; do
			[ -n "${CPU_SHARES[$shape]:-}" ] || continue
			echo "| $shape | ${CPU_SHARES[$shape]} |"
		done
		echo
	fi
	echo "The in-server decoder is \`SELECT count(*) FROM pg_logical_slot_get_binary_changes(slot, end_lsn, NULL, 'proto_version', '1', 'publication_names', ...)\` on a third slot created with the twin: PostgreSQL's decoding and pgoutput's messages, with nothing sent, the bound of any client. ferry's CPU-seconds are user + system time of the process (getrusage, through GNU time). pg_recvlogical (pgoutput proto_version 1, the same publication, \`-E\` the backlog's end LSN, output to /dev/null) reads a twin slot created right after ferry's. ferry's time is from start to exit: connect, checks, decode, load into ClickHouse, confirm. Each run checks ClickHouse's live row count; the last of each shape runs \`ferry verify\`."
	echo
}

report_load() {
	echo "### Initial load: $LOAD_ROWS rows ($LOAD_SIZE; orders shape plus a 200-byte text column)"
	echo
	echo "| what | seconds | rows/s | runs (s) |"
	echo "|---|---:|---:|---|"
	echo "| ferry first start (\`ferry run --catch-up\`: slot, copy, exit) | $(med load:ferry) | $(rate "$LOAD_ROWS" "$(med load:ferry)") | $(join "$(get load:ferry)") |"
	echo "| ferry's \"copied table\" line (the copy alone) | | $(med load:copyrps) | $(join "$(get load:copyrps)") rows/s |"
	echo "| \`psql -c '\\copy orders to stdout' \\| clickhouse-client --query 'INSERT ... FORMAT TSV'\` | $(med load:shell) | $(rate "$LOAD_ROWS" "$(med load:shell)") | $(join "$(get load:shell)") |"
	echo
	echo "ferry's speed-up over the shell pipeline (its rows/s / the pipeline's; target 1.3): median $(row_of load:speedup). ferry's CPU-seconds: $(row_of load:cpu), per 1M rows $(row_of load:cpum) (target: at most 0.5). ferry's peak RSS: $(row_of load:rss) MB."
	if [ -n "$(get load:readcpu)" ]; then
		echo "Taking the bytes off PostgreSQL alone, psql reading the same binary COPY and throwing it away (\`\\copy orders to '/dev/null' with (format binary)\`), used $(row_of load:readcpu) CPU-s, $(row_of load:readsys) of it system time; ferry's system time: $(row_of load:sys) CPU-s. ferry's CPU holds that reading too, then the conversion and the sending of as many bytes to ClickHouse."
	fi
	echo "The pipeline's table is a plain MergeTree with created_at as String (ClickHouse 18.16's DateTime cannot hold timestamptz), so it does less work than ferry's ReplacingMergeTree with converted types. The last ferry copy is checked with \`ferry verify\`."
	echo
}

report_steady() {
	echo "### Steady state: $STEADY_RATE rows/s for ${STEADY_SECS}s"
	echo
	echo "deploy/perfload inserts 100-row transactions at a fixed pace while ferry streams, and polls ClickHouse every 20 ms for the highest id; a transaction's latency runs from its COMMIT returning to the first poll that sees its last row (an upper bound: up to one poll interval and the poll's own time are included). Target: p99 under 1 s."
	echo
	echo "| achieved rows/s | p50 ms | p99 ms | max ms | ferry peak RSS MB |"
	echo "|---|---|---|---|---|"
	echo "| $(row_of steady:rate) | $(row_of steady:p50) | $(row_of steady:p99) | $(row_of steady:max) | $(row_of steady:rss) |"
	echo
}

report_resync() {
	echo "### Resync beside the stream: $STEADY_RATE rows/s into one table while another of $LOAD_ROWS rows is copied afresh"
	echo
	echo "deploy/perfload writes as in the steady state into \`orders\` for ${STEADY_SECS}s; from a sixth of the way in, \`ferry resync public.big\` (which waits until the shadow table is swapped in) copies a table shaped as the initial load's. The latencies are those of \`orders\` over the whole ${STEADY_SECS}s; the last run runs \`ferry verify\`."
	echo
	echo "| resync s | orders p50 ms | orders p99 ms | orders max ms |"
	echo "|---|---|---|---|"
	echo "| $(row_of resync:secs) | $(row_of resync:p50) | $(row_of resync:p99) | $(row_of resync:max) |"
	echo
}

# report_knee writes this leg's knee file next to PERF_DOC, redraws the
# plot from every leg's, and reports the rates.
report_knee() {
	local dir leg file row knee="" off ach p50 p99 mx
	dir="$(dirname "$DOC")"
	leg="${PERF_LEG:-local}"
	file="$dir/perf-knee-$leg.tsv"
	{
		echo "# ClickHouse $CH_VERSION"
		printf '%s\n' "${KNEE_ROWS[@]}"
	} >"$file"
	bin/perfplot -out "$dir/perf-knee.svg" "$dir"/perf-knee-*.tsv
	echo "### The knee: the highest rate with a p99 under 1 s"
	echo
	echo "The steady state's measure (above) once at each offered rate for ${KNEE_SECS}s, in transactions of 100 rows or more (at most 200 a second, which one writer keeps up with), until the p99 reaches 1 s. A rate whose rows were not all visible 60 s after the writing ended counts as 60000 ms. The plot, [perf-knee.svg](perf-knee.svg), shows every leg's last run."
	echo
	echo "| offered rows/s | achieved rows/s | p50 ms | p99 ms | max ms |"
	echo "|---:|---:|---:|---:|---:|"
	for row in "${KNEE_ROWS[@]}"; do
		IFS=$'\t' read -r off ach p50 p99 mx <<<"$row"
		echo "| $off | $ach | $p50 | $p99 | $mx |"
		if [ "${p99%.*}" -lt 1000 ]; then knee="$ach"; fi
	done
	echo
	if [ "${p99%.*}" -lt 1000 ]; then
		echo "The knee: above $knee rows/s, the highest rate offered (no rate reached a p99 of 1 s; target: at least 50,000)."
	else
		echo "The knee: ${knee:-below the lowest rate offered} rows/s (target: at least 50,000)."
	fi
	echo
}

report_memory() {
	[ -n "$(get one:rss)$(get txn100:rss)$(get single:rss)$(get bigtxn:rss)$(get load:rss)$(get steady:rss)" ] || return 0
	echo "### Peak RSS of ferry (target: under 256 MB)"
	echo
	echo "| run | median MB | max MB |"
	echo "|---|---:|---:|"
	local k label
	for k in one:rss txn100:rss single:rss bigtxn:rss load:rss steady:rss; do
		[ -n "$(get "$k")" ] || continue
		case "$k" in
		one:rss) label="catch-up, $BACKLOG_ROWS rows in one transaction" ;;
		txn100:rss) label="catch-up, $BACKLOG_ROWS rows in 100-row transactions" ;;
		single:rss) label="catch-up, $BACKLOG_ROWS single-row transactions" ;;
		bigtxn:rss) label="catch-up, one transaction of $BIGTXN_ROWS rows" ;;
		load:rss) label="initial load, $LOAD_ROWS rows" ;;
		steady:rss) label="steady state, $STEADY_RATE rows/s" ;;
		esac
		echo "| $label | $(med "$k") | $(maxof "$k") |"
	done
	if [ -n "$(get bigtxn:ferry)" ]; then
		echo
		echo "The $BIGTXN_ROWS-row transaction: pg_recvlogical $(row_of bigtxn:recv) s, ferry $(row_of bigtxn:ferry) s."
	fi
	echo
}

write_report() {
	local body="$OUT/report-$STAMP.md"
	{
		echo "<!-- perf:begin$LEG_TAG: written by deploy/perf.sh (make perf); edits between the markers are lost -->"
		echo "## ClickHouse $CH_VERSION${PERF_LEG:+ ($PERF_LEG leg)}: measured $(date -u +%Y-%m-%dT%H:%MZ)"
		echo
		echo "- Machine: $MACHINE; load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."
		echo "- PostgreSQL $PG_VERSION, ClickHouse $CH_VERSION (the local stack, on the same machine), $GO_VERSION, ferry $FERRY_REV."
		echo "- Command: \`make perf\` (RUNS=$RUNS BACKLOG_ROWS=$BACKLOG_ROWS LOAD_ROWS=$LOAD_ROWS BIGTXN_ROWS=$BIGTXN_ROWS STEADY_RATE=$STEADY_RATE STEADY_SECS=$STEADY_SECS KNEE_SECS=$KNEE_SECS${COPY_WORKERS:+ COPY_WORKERS=$COPY_WORKERS}${BATCH_AGE:+ BATCH_AGE=$BATCH_AGE}${BATCH_QUIET:+ BATCH_QUIET=$BATCH_QUIET}); raw figures: \`$RAW\`."
		echo
		[ -n "$(get one:ferry)$(get txn100:ferry)$(get single:ferry)" ] && report_catchup
		[ -n "$(get load:ferry)" ] && report_load
		[ -n "$(get steady:p99)" ] && report_steady
		[ -n "$(get resync:p99)" ] && report_resync
		[ "${#KNEE_ROWS[@]}" -gt 0 ] && report_knee
		report_memory
		echo "<!-- perf:end$LEG_TAG -->"
	} >"$body"
	mkdir -p "$(dirname "$DOC")"
	# Each leg (PERF_LEG: modern, legacy) has markers of its own.
	if [ -f "$DOC" ] && grep -q "^<!-- perf:begin$LEG_TAG:" "$DOC" && grep -q "^<!-- perf:end$LEG_TAG -->" "$DOC"; then
		awk -v body="$body" -v b="<!-- perf:begin$LEG_TAG:" -v e="<!-- perf:end$LEG_TAG -->" '
			index($0, b) == 1 { while ((getline l < body) > 0) print l; skip = 1; next }
			index($0, e) == 1 { skip = 0; next }
			!skip { print }' "$DOC" >"$DOC.tmp"
		mv "$DOC.tmp" "$DOC"
	elif [ -f "$DOC" ]; then
		{ echo; cat "$body"; } >>"$DOC"
	else
		{ echo "# ferry's performance"; echo; cat "$body"; } >"$DOC"
	fi
	cat "$body"
	log "report: $DOC (this run alone: $body)"
}
