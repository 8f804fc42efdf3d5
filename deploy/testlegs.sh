#!/usr/bin/env bash
# `make test`'s test run: go test ./... once against each ClickHouse server of
# the local stack, ClickHouse 26.7 (the modern leg) first, then 18.16 (the
# legacy leg). Both legs always run; the exit status is non-zero when either
# failed. Needs the variables of .stack/env.
#
#   LEGS="modern legacy" (default)  which legs to run
#   PKGS="./..."                    which packages
#   GOTESTFLAGS                     more go test flags (-run, -v, ...)
#   TESTP=4                         packages tested at once (go test -p)
#   SHARDS=2                        processes the replicator's tests run in
set -uo pipefail

: "${FERRY_CH_MODERN_URL:?not set: run make stack-up and . .stack/env}"
: "${FERRY_CH_LEGACY_URL:?not set: run make stack-up and . .stack/env}"
GO="${GO:-go}"
read -r -a pkgs <<<"${PKGS:-./...}"
read -r -a flags <<<"${GOTESTFLAGS:-}"
failed=()
summary=()
# The bench's tests read PostgreSQL only, never ClickHouse: the first leg
# runs them, the others skip the package (four minutes of a leg).
pgonly=github.com/ferry-cdc/ferry/bench
sharded_pkg=github.com/ferry-cdc/ferry/replicator
first=1

for leg in ${LEGS:-modern legacy}; do
	case "$leg" in
	modern)
		url="$FERRY_CH_MODERN_URL"
		secret="${FERRY_CH_SECRET_URL:-}"
		;;
	legacy)
		url="$FERRY_CH_LEGACY_URL"
		secret="${FERRY_CH_LEGACY_SECRET_URL:-}"
		;;
	*)
		echo "testlegs: unknown leg $leg (modern or legacy)" >&2
		exit 2
		;;
	esac
	version="$(clickhouse-client --host "$(sed -E 's#^[a-z]+://([^@/]*@)?([^:/]+).*#\2#' <<<"$url")" \
		--port "$(sed -E 's#^[a-z]+://[^/]*:([0-9]+).*#\1#' <<<"$url")" -q 'SELECT version()' 2>/dev/null || echo unknown)"
	echo "=== leg $leg: ClickHouse $version ($url)"
	# A test binary killed mid-run (the OOM killer, a timeout) leaves its
	# replication slots behind, and an idle slot holds WAL and the catalogs'
	# horizon for every later test. The stack's PostgreSQL is the suite's
	# own: drop what nothing reads before the leg starts (but make demo's,
	# which it keeps for a look afterwards).
	if dropped="$(psql "${FERRY_PG_URL:-}" -XAtqc "SELECT string_agg(slot_name, ' ') FROM
			(SELECT slot_name, pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active AND slot_name <> 'ferry_demo') d" 2>&1)"; then
		[ -z "$dropped" ] || echo "=== dropped idle replication slots left by an earlier run: $dropped"
	else
		echo "=== could not drop idle replication slots: $dropped"
	fi
	start=$(date +%s)
	env_args=(FERRY_CH_URL="$url" FERRY_CH_SECRET_URL="$secret" FERRY_CH_LEG="$leg" FERRY_CH_LEG_VERSION="$version")
	# The modern server (clickhouse-local from libchdb) serves no TLS port:
	# the TLS tests run on the legacy leg only. The chaos suite starts
	# private servers of its own: libchdb-hosted 26.7 in the modern leg.
	unset_args=()
	if [ "$leg" = modern ]; then
		unset_args=(-u FERRY_CH_TLS_URL)
		env_args+=(FERRY_CHAOS_CH=chdb)
	fi
	# -p: the packages' tests mostly wait on the servers (loader/kafka: 396 s
	# of wall time, 110 s of CPU in all), so four at once on two cores.
	# -timeout is a hang detector for a whole package: the replicator's
	# tests take 630-1060 s on this suite's 2-core machines with another
	# suite beside them, and passed 20 minutes with two beside them.
	legpkgs=("${pkgs[@]}")
	if [ "$first" -eq 0 ]; then
		if ! listed="$("$GO" list "${pkgs[@]}")"; then
			failed+=("$leg (go list ${pkgs[*]})")
			continue
		fi
		mapfile -t legpkgs < <(grep -vxF "$pgonly" <<<"$listed")
	fi
	first=0
	rc=0
	# The replicator's tests bound a leg (600-670 s of 720 s quiet, 935 s
	# with busy loops beside it), mostly waiting on the servers: they run
	# in SHARDS processes at once beside the other packages, each taking
	# every SHARDS-th test by name. Its tests use databases and slots of
	# their own, so they do not meet.
	shards="${SHARDS:-2}"
	case " ${flags[*]} " in *" -run"*) shards=1 ;; esac # a -run of the caller's chooses the tests
	sharded=()
	if [ "$shards" -gt 1 ] && [ "${#legpkgs[@]}" -gt 0 ]; then
		if ! listed="$("$GO" list "${legpkgs[@]}")"; then
			failed+=("$leg (go list ${legpkgs[*]})")
			continue
		fi
		if grep -qxF "$sharded_pkg" <<<"$listed"; then
			mapfile -t legpkgs < <(grep -vxF "$sharded_pkg" <<<"$listed")
			if ! names="$("$GO" test -list '.*' "$sharded_pkg" | grep -E '^(Test|Example|Fuzz)')"; then
				failed+=("$leg (go test -list $sharded_pkg)")
				continue
			fi
			for ((i = 0; i < shards; i++)); do
				re="$(awk -v n="$shards" -v i="$i" 'NR % n == i' <<<"$names" | paste -sd '|')"
				[ -n "$re" ] && sharded+=("^($re)\$")
			done
		fi
	fi
	outs=()
	pids=()
	for ((i = 0; i < ${#sharded[@]}; i++)); do
		out="$(mktemp)"
		outs+=("$out")
		env "${unset_args[@]}" "${env_args[@]}" "$GO" test -count=1 -timeout 30m "${flags[@]}" -run "${sharded[$i]}" "$sharded_pkg" >"$out" 2>&1 &
		pids+=($!)
	done
	if [ "${#legpkgs[@]}" -gt 0 ]; then
		env "${unset_args[@]}" "${env_args[@]}" "$GO" test -count=1 -p "${TESTP:-4}" -timeout 30m "${flags[@]}" "${legpkgs[@]}" || rc=$?
	fi
	for ((i = 0; i < ${#pids[@]}; i++)); do
		src=0
		wait "${pids[$i]}" || src=$?
		echo "--- $sharded_pkg, shard $((i + 1)) of ${#pids[@]}: exit $src"
		cat "${outs[$i]}"
		rm -f "${outs[$i]}"
		[ "$src" -eq 0 ] || rc=$src
	done
	took=$(($(date +%s) - start))
	summary+=("leg $leg (ClickHouse $version): exit $rc after ${took} s")
	[ "$rc" -eq 0 ] || failed+=("$leg")
done

printf '=== %s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
	echo "=== FAILED legs: ${failed[*]}"
	exit 1
fi
