# The measurements of deploy/perf.sh (sourced): catch-up, initial load,
# steady state. Each adds its figures to R and to the raw file.
# shellcheck shell=bash

# catchup_run SHAPE ROWS RUN TAG: a backlog of ROWS rows in SHAPE (one,
# txn100, single) behind a slot, decoded by pg_recvlogical on a twin slot
# and by ferry run --catch-up.
catchup_run() {
	local shape="$1" rows="$2" run="$3" tag="$4" url t0 t1
	url="$(pg_url "$DB_CU")"
	log "catch-up $tag run $run/$RUNS: $rows rows ($shape)"
	fresh_db "$DB_CU"
	pgdb "$DB_CU" <<-'SQL'
		CREATE TABLE orders (
			id bigserial PRIMARY KEY,
			customer_id bigint NOT NULL,
			total numeric(10,2) NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now()
		);
		CREATE PROCEDURE backlog(txns int, per int) LANGUAGE plpgsql AS $$
		BEGIN
			FOR i IN 1..txns LOOP
				INSERT INTO orders (customer_id, total)
				SELECT (random() * 10000)::int, (random() * 1000)::numeric(10,2) FROM generate_series(1, per);
				COMMIT;
			END LOOP;
		END $$;
	SQL
	# A first start on the empty table makes the slot, publication and
	# ClickHouse table; the twin slot starts at (about) the same point.
	ferry_flags "$DB_CU"
	run_logged "cu-$tag-$run-first" "$FERRY" run "${FLAGS[@]}" "${RUNX[@]}" --catch-up
	pgdb "$DB_CU" -c "SELECT pg_create_logical_replication_slot('$SLOT_TWIN', 'pgoutput')" \
		-c "SELECT pg_create_logical_replication_slot('$SLOT_DEC', 'pgoutput')" >/dev/null
	# Commit durability does not change what the WAL holds; without it the
	# single-row backlog is written in seconds rather than minutes.
	t0="$(now)"
	case "$shape" in
	one) PGOPTIONS="-c synchronous_commit=off" pgdb "$DB_CU" -c "INSERT INTO orders (customer_id, total)
		SELECT (random() * 10000)::int, (random() * 1000)::numeric(10,2) FROM generate_series(1, $rows)" ;;
	txn100) PGOPTIONS="-c synchronous_commit=off" pgdb "$DB_CU" -c "CALL backlog($((rows / 100)), 100)" ;;
	single) PGOPTIONS="-c synchronous_commit=off" pgdb "$DB_CU" -c "CALL backlog($rows, 1)" ;;
	esac
	t1="$(now)"
	local end_lsn
	end_lsn="$(pgdb "$DB_CU" -c "SELECT pg_current_wal_insert_lsn()")" # past the last commit, written or not (asynchronous commit)
	# A record past end_lsn from another database, so that a decoder
	# waiting for one at or after end_lsn sees it.
	pgq -c "SELECT pg_logical_emit_message(false, 'ferry_perf', 'end')" >/dev/null
	# Settle first: autovacuum on the new rows and a due checkpoint would
	# otherwise run during the timings.
	pgdb "$DB_CU" -c "VACUUM (ANALYZE) orders" -c "CHECKPOINT" >/dev/null
	log "  backlog written in $(elapsed "$t0" "$t1")s, up to $end_lsn"

	t0="$(now)"
	if ! timeout 900 pg_recvlogical -d "$url" --slot "$SLOT_TWIN" --start -o proto_version=1 \
		-o publication_names="$PUB" --no-loop -E "$end_lsn" -f /dev/null >"$LOGDIR/cu-$tag-$run-recv.log" 2>&1; then
		log "FAILED: pg_recvlogical did not end by itself at $end_lsn"
		tail -n 20 "$LOGDIR/cu-$tag-$run-recv.log" >&2
		return 1
	fi
	t1="$(now)"
	local recv
	recv="$(elapsed "$t0" "$t1")"
	record catchup "$tag" "$run" pg_recvlogical "$rows" "$recv" "$(rate "$rows" "$recv")" ""
	drop_slot "$SLOT_TWIN" >/dev/null
	# PostgreSQL's own decoder, in the server: the same pgoutput messages,
	# counted, not sent. The bound of any client of the slot.
	t0="$(now)"
	local decoded
	decoded="$(pgdb "$DB_CU" -c "SELECT count(*) FROM pg_logical_slot_get_binary_changes('$SLOT_DEC', '$end_lsn', NULL,
		'proto_version', '1', 'publication_names', '$PUB')")"
	t1="$(now)"
	local dec
	dec="$(elapsed "$t0" "$t1")"
	record catchup "$tag" "$run" in_server_decoder "$rows" "$dec" "$(rate "$rows" "$dec")" ""
	drop_slot "$SLOT_DEC" >/dev/null

	ferry_flags "$DB_CU"
	# The last run of a shape keeps a CPU profile (sampling costs ~1 %).
	local prof=""
	[ "$run" = "$RUNS" ] && prof="$LOGDIR/cu-$tag.prof"
	measured "cu-$tag-$run-ferry" env FERRY_CPUPROFILE="$prof" "$FERRY" run "${FLAGS[@]}" "${RUNX[@]}" --catch-up
	record catchup "$tag" "$run" ferry_catch_up "$rows" "$SECS" "$(rate "$rows" "$SECS")" "$RSS_MB"
	log "  in-server decoder ${dec}s ($decoded messages); pg_recvlogical ${recv}s; ferry ${SECS}s (decoder/ferry $(ratio "$dec" "$SECS")), ferry CPU ${CPU_S}s, peak RSS ${RSS_MB} MB"
	local n
	n="$(live_rows "$DB_CU" orders)"
	if [ "$n" != "$rows" ]; then
		log "WRONG: ClickHouse holds $n live rows, want $rows"
		return 1
	fi
	if [ "$run" = "$RUNS" ]; then
		run_logged "cu-$tag-$run-verify" "$FERRY" --log-level warn verify "${FLAGS[@]}"
	fi
	add "$tag:recv" "$recv"
	add "$tag:ferry" "$SECS"
	add "$tag:ratio" "$(ratio "$SECS" "$recv")"
	add "$tag:rss" "$RSS_MB"
	add "$tag:dec" "$dec"
	add "$tag:decratio" "$(ratio "$dec" "$SECS")"
	add "$tag:cpu" "$CPU_S"
	add "$tag:cpum" "$(per_million "$CPU_S" "$rows")"
	[ -n "$prof" ] && [ -s "$prof" ] && CPU_SHARES["$tag"]="$(cpu_shares "$prof")"
	drop_slot "$SLOT" >/dev/null
}

# load_section: LOAD_ROWS rows copied RUNS times by ferry and by the shell
# pipeline.
load_section() {
	local run n rps
	log "initial load: $LOAD_ROWS rows"
	fresh_db "$DB_LOAD"
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
			now() - g * interval '1 second', repeat(md5(g::text), 6) || left(md5(g::text), 8)
		FROM generate_series(1, $LOAD_ROWS) g;
		VACUUM (FREEZE, ANALYZE) orders;
	SQL
	LOAD_SIZE="$(pgdb "$DB_LOAD" -c "SELECT pg_size_pretty(pg_table_size('orders'))")"
	for run in $(seq 1 "$RUNS"); do
		log "initial load run $run/$RUNS"
		drop_slot "$SLOT" >/dev/null 2>&1 || true
		drop_ch_db "$DB_LOAD"
		ferry_flags "$DB_LOAD"
		measured "load-$run-ferry" "$FERRY" --log-format json run "${FLAGS[@]}" "${RUNX[@]}" --catch-up
		rps="$(sed -n 's/.*"copied table".*"rows_per_s":\([0-9.e+]*\).*/\1/p' "$LOGDIR/load-$run-ferry.log" | head -n 1)"
		n="$(live_rows "$DB_LOAD" orders)"
		if [ "$n" != "$LOAD_ROWS" ]; then
			log "WRONG: ClickHouse holds $n live rows, want $LOAD_ROWS"
			return 1
		fi
		record load - "$run" ferry_first_start "$LOAD_ROWS" "$SECS" "$(rate "$LOAD_ROWS" "$SECS")" "$RSS_MB"
		add load:ferry "$SECS"
		add load:copyrps "$(awk -v v="${rps:-0}" 'BEGIN { printf "%.0f", v }')"
		add load:rss "$RSS_MB"
		add load:cpu "$CPU_S"
		add load:cpum "$(per_million "$CPU_S" "$LOAD_ROWS")"
		add load:sys "$SYS_S"
		local ferry_secs="$SECS"
		drop_slot "$SLOT" >/dev/null

		# What taking the bytes off PostgreSQL costs a client by itself:
		# psql reads the same binary COPY and throws it away.
		measured "load-$run-read" psql "$(pg_url "$DB_LOAD")" -X -v ON_ERROR_STOP=1 -qAt \
			-c "\\copy orders (id, customer_id, total, created_at, note) to '/dev/null' with (format binary)"
		add load:readcpu "$CPU_S"
		add load:readsys "$SYS_S"

		chq --query "CREATE TABLE $DB_LOAD.orders_shell (id Int64, customer_id Int64, total Decimal(10, 2), created_at String, note String) ENGINE = MergeTree ORDER BY id"
		local t0 t1 secs
		t0="$(now)"
		psql "$(pg_url "$DB_LOAD")" -X -v ON_ERROR_STOP=1 -qAt -c '\copy orders (id, customer_id, total, created_at, note) to stdout' |
			chq --query "INSERT INTO $DB_LOAD.orders_shell (id, customer_id, total, created_at, note) FORMAT TSV"
		t1="$(now)"
		secs="$(elapsed "$t0" "$t1")"
		n="$(chq --query "SELECT count() FROM $DB_LOAD.orders_shell")"
		if [ "$n" != "$LOAD_ROWS" ]; then
			log "WRONG: the shell pipeline loaded $n rows, want $LOAD_ROWS"
			return 1
		fi
		record load - "$run" shell_pipeline "$LOAD_ROWS" "$secs" "$(rate "$LOAD_ROWS" "$secs")" ""
		add load:shell "$secs"
		add load:speedup "$(ratio "$secs" "$ferry_secs")"
		log "  ferry ${ferry_secs}s (copy ${rps%.*} rows/s, peak RSS ${RSS_MB} MB); shell ${secs}s"
	done
	ferry_flags "$DB_LOAD"
	run_logged "load-verify" "$FERRY" --log-level warn verify "${FLAGS[@]}"
	drop_pg_db "$DB_LOAD"
	drop_ch_db "$DB_LOAD"
}

# stream_ferry NAME: starts ferry run (FLAGS, RUNX) in the background, its
# log in NAME-ferry.log, and returns once it streams (the "streaming" line,
# after any first copy); FERRY_PID is its pid.
stream_ferry() {
	local log="$LOGDIR/$1-ferry.log"
	"$FERRY" run "${FLAGS[@]}" "${RUNX[@]}" >"$log" 2>&1 &
	FERRY_PID=$!
	BG_PIDS+=("$FERRY_PID")
	for _ in $(seq 1 600); do
		grep -q '"catch_up"' "$log" && return 0
		kill -0 "$FERRY_PID" 2>/dev/null || { tail -n 20 "$log" >&2; return 1; }
		sleep 0.2
	done
	log "FAILED: ferry did not start streaming in 120 s"
	return 1
}

# stop_ferry NAME: SIGTERM to FERRY_PID, which must exit cleanly.
stop_ferry() {
	kill -TERM "$FERRY_PID"
	wait "$FERRY_PID" || { log "FAILED: ferry exited non-zero after SIGTERM"; tail -n 20 "$LOGDIR/$1-ferry.log" >&2; return 1; }
}

# steady_db: a fresh DB_ST with perfload's orders table, and FLAGS for it.
steady_db() {
	fresh_db "$DB_ST"
	pgdb "$DB_ST" -c "CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint NOT NULL, total numeric(10,2) NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(), note text NOT NULL)"
	ferry_flags "$DB_ST"
}

# steady_run RUN: ferry streams while perfload writes at STEADY_RATE.
steady_run() {
	local run="$1" pid out hwm n
	log "steady state run $run/$RUNS: $STEADY_RATE rows/s for ${STEADY_SECS}s"
	steady_db
	stream_ferry "steady-$run" || return 1
	pid=$FERRY_PID
	out="$("$PERFLOAD" -pg "$(pg_url "$DB_ST")" -ch "$FERRY_CH_URL" -ch-table "$DB_ST.orders" \
		-rate "$STEADY_RATE" -duration "${STEADY_SECS}s" 2>"$LOGDIR/steady-$run-perfload.err")" || {
		log "FAILED: perfload: $(cat "$LOGDIR/steady-$run-perfload.err") $out"
		return 1
	}
	echo "$out" >"$LOGDIR/steady-$run-perfload.log"
	hwm="$(awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status")"
	stop_ferry "steady-$run" || return 1
	kv() { printf '%s\n' "$out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
	n="$(live_rows "$DB_ST" orders)"
	if [ "$n" != "$(kv rows)" ]; then
		log "WRONG: ClickHouse holds $n live rows, perfload wrote $(kv rows)"
		return 1
	fi
	record steady - "$run" ferry_stream "$(kv rows)" "$STEADY_SECS" "$(kv rows_per_s)" "$hwm"
	add steady:rate "$(kv rows_per_s)"
	add steady:p50 "$(kv p50_ms)"
	add steady:p99 "$(kv p99_ms)"
	add steady:max "$(kv max_ms)"
	add steady:rss "$hwm"
	log "  $out; peak RSS ${hwm} MB"
}

# resync_run RUN: perfload writes STEADY_RATE rows/s into orders for
# STEADY_SECS while, from a sixth of the way in, `ferry resync` copies
# big, a table of LOAD_ROWS rows, afresh: the commit-to-visible latency of
# orders during the resync, and the resync's time.
resync_run() {
	local run="$1" out n t0 t1 secs lpid
	log "resync run $run/$RUNS: $STEADY_RATE rows/s into orders while a $LOAD_ROWS-row table is copied afresh"
	fresh_db "$DB_RS"
	pgdb "$DB_RS" <<-SQL
		CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint NOT NULL, total numeric(10,2) NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now(), note text NOT NULL);
		CREATE TABLE big (
			id bigserial PRIMARY KEY,
			customer_id bigint NOT NULL,
			total numeric(10,2) NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now(),
			note text NOT NULL
		);
		INSERT INTO big (customer_id, total, created_at, note)
		SELECT (random() * 10000)::int, (random() * 1000)::numeric(10,2),
			now() - g * interval '1 second', repeat(md5(g::text), 6) || left(md5(g::text), 8)
		FROM generate_series(1, $LOAD_ROWS) g;
		VACUUM (FREEZE, ANALYZE) big;
	SQL
	ferry_flags "$DB_RS" public.orders,public.big
	stream_ferry "resync-$run" || return 1
	"$PERFLOAD" -pg "$(pg_url "$DB_RS")" -ch "$FERRY_CH_URL" -ch-table "$DB_RS.orders" \
		-rate "$STEADY_RATE" -duration "${STEADY_SECS}s" >"$LOGDIR/resync-$run-perfload.log" 2>"$LOGDIR/resync-$run-perfload.err" &
	lpid=$!
	sleep "$((STEADY_SECS / 6))"
	t0="$(now)"
	run_logged "resync-$run-resync" "$FERRY" resync "${FLAGS[@]}" public.big
	t1="$(now)"
	secs="$(elapsed "$t0" "$t1")"
	wait "$lpid" || { log "FAILED: perfload: $(cat "$LOGDIR/resync-$run-perfload.err")"; return 1; }
	out="$(cat "$LOGDIR/resync-$run-perfload.log")"
	stop_ferry "resync-$run" || return 1
	kv() { printf '%s\n' "$out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
	n="$(live_rows "$DB_RS" orders)"
	if [ "$n" != "$(kv rows)" ]; then
		log "WRONG: ClickHouse holds $n live rows of orders, perfload wrote $(kv rows)"
		return 1
	fi
	n="$(live_rows "$DB_RS" big)"
	if [ "$n" != "$LOAD_ROWS" ]; then
		log "WRONG: ClickHouse holds $n live rows of big, want $LOAD_ROWS"
		return 1
	fi
	if [ "$run" = "$RUNS" ]; then
		run_logged "resync-$run-verify" "$FERRY" --log-level warn verify "${FLAGS[@]}"
	fi
	record resync - "$run" ferry_resync "$LOAD_ROWS" "$secs" "$(rate "$LOAD_ROWS" "$secs")" ""
	add resync:secs "$secs"
	add resync:p50 "$(kv p50_ms)"
	add resync:p99 "$(kv p99_ms)"
	add resync:max "$(kv max_ms)"
	log "  resync ${secs}s; orders meanwhile: $out"
}

# knee_run RATE: the steady state at RATE rows/s for KNEE_SECS, once, in
# transactions of at least 100 rows and at most 200 a second (a single
# writer keeps up with that). Sets KNEE_P99 (ms) and KNEE_ACHIEVED (rows/s);
# a rate whose rows ClickHouse had not all shown 60 s after the writing
# ended counts with a p99 of at least those 60 s.
knee_run() {
	local rate="$1" txn out n
	txn=$(((rate / 200 + 99) / 100 * 100))
	[ "$txn" -lt 100 ] && txn=100
	log "knee: $rate rows/s in $txn-row transactions for ${KNEE_SECS}s"
	steady_db
	stream_ferry "knee-$rate" || return 1
	out="$("$PERFLOAD" -pg "$(pg_url "$DB_ST")" -ch "$FERRY_CH_URL" -ch-table "$DB_ST.orders" -txn-rows "$txn" \
		-rate "$rate" -duration "${KNEE_SECS}s" -drain 60s 2>"$LOGDIR/knee-$rate-perfload.err")" || true
	echo "$out" >"$LOGDIR/knee-$rate-perfload.log"
	stop_ferry "knee-$rate" || return 1
	kv() { printf '%s\n' "$out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
	[ -n "$(kv rows)" ] || { log "FAILED: perfload: $(cat "$LOGDIR/knee-$rate-perfload.err")"; return 1; }
	KNEE_ACHIEVED="$(kv rows_per_s)" KNEE_P99="$(kv p99_ms)"
	if [ "$(kv unseen)" != 0 ]; then
		KNEE_P99=60000
		log "  $(kv unseen) transactions not visible 60 s after the writing ended"
	else
		n="$(live_rows "$DB_ST" orders)"
		if [ "$n" != "$(kv rows)" ]; then
			log "WRONG: ClickHouse holds $n live rows, perfload wrote $(kv rows)"
			return 1
		fi
	fi
	record knee "$rate" 1 ferry_stream "$(kv rows)" "$KNEE_SECS" "$KNEE_ACHIEVED" ""
	KNEE_ROWS+=("$rate	$KNEE_ACHIEVED	$(kv p50_ms)	$KNEE_P99	$(kv max_ms)")
	log "  $out"
}

# knee_section: knee_run at each of KNEE_RATES, in order, until one ends
# with a p99 of 1 s or more, or the writer cannot offer 90% of the rate.
knee_section() {
	local rate
	KNEE_ROWS=()
	for rate in $KNEE_RATES; do
		knee_run "$rate" || return 1
		if [ "${KNEE_P99%.*}" -ge 1000 ] || [ "$(awk -v a="$KNEE_ACHIEVED" -v r="$rate" 'BEGIN { print (a < 0.9 * r) }')" = 1 ]; then
			break
		fi
	done
}
