#!/usr/bin/env bash
# Local development / CI stack for ferry: one PostgreSQL 15 and two ClickHouse
# servers (a modern 26.7 and Debian's 18.16), all bound to 127.0.0.1 on
# non-default ports.
#
#   deploy/stack.sh up       start both (installs the Debian packages if missing)
#   deploy/stack.sh down     stop both
#   deploy/stack.sh status   tell what runs
#   deploy/stack.sh purge    stop both and delete all their data
#
# PostgreSQL : 127.0.0.1:55432, superuser "postgres", trust auth, wal_level=logical,
#              TLS on the same port (ssl = on; sslmode=disable keeps working)
# ClickHouse 26.7 (modern, the default target): native 127.0.0.1:29000, http
#              28123, user "default" without password. It is clickhouse-local
#              from chDB's libchdb (npm @chdb/lib-linux-x64-gnu, pinned below)
#              serving the network protocols; see deploy/chdb/README.md for how
#              it differs from clickhouse-server (no TLS port, for one).
# ClickHouse 18.16 (legacy, Debian's clickhouse-server): native 127.0.0.1:19000,
#              secure native (TLS) 19440, http 18123, user "default" without
#              password
#
# TLS: `up` makes a self-signed CA and a server certificate for 127.0.0.1 and
# localhost (openssl) in .stack/tls, and .stack/env exports FERRY_TLS_CA,
# FERRY_PG_TLS_URL (sslmode=verify-full) and FERRY_CH_TLS_URL (secure=true)
# once both servers serve TLS (a server started by an older stack.sh does
# not until it is restarted).
#
# Overrides, for a second stack beside the first (defaults in brackets):
# FERRY_STACK_DIR [.stack], FERRY_STACK_PG_PORT [55432], FERRY_STACK_CH_PORT
# [19000], FERRY_STACK_CH_HTTP_PORT [18123], FERRY_STACK_CH_INTERSERVER_PORT
# [19009], FERRY_STACK_CH_TLS_PORT [19440], FERRY_STACK_KAFKA_PORT [19092].
#
# State lives in <repo>/.stack (gitignored). The PostgreSQL data directory must
# be readable by the "postgres" OS user even when the checkout sits in a 0700
# home directory, so when running as root it lives in
# /var/lib/ferry-stack/<hash of the repo path>/ and .stack/pg links to it.
# After `up`, `. .stack/env` exports FERRY_PG_URL, FERRY_CH_URL (26.7) and
# FERRY_CH_LEGACY_URL (18.16). The libchdb download (~180 MB) is cached in
# FERRY_CHDB_CACHE [/var/cache/ferry-chdb as root, else ~/.cache/ferry-chdb],
# so a second `up` does not fetch it again. Ports of the modern server:
# FERRY_STACK_CHM_PORT [29000], FERRY_STACK_CHM_HTTP_PORT [28123], FERRY_STACK_CHM_INNER_PORT
# [FERRY_STACK_CHM_PORT + 1] (the server behind the shield).
# KAFKA=1 deploy/stack.sh up also starts kfake, an in-memory TEST broker
# (deploy/kfake), on 127.0.0.1:19092 and exports FERRY_KAFKA_BROKERS.
# `up` as root installs Debian's zookeeper (for deploy/clustertest); it starts
# no ZooKeeper. CLUSTER=1 deploy/stack.sh up also starts deploy/cluster.sh: a
# ZooKeeper and four ClickHouse 18.16 servers, the cluster "ferry_cluster" of
# two shards of two replicas, on 127.0.0.1:19100 (ZooKeeper) and 19110, 19120,
# 19130, 19140 (native; FERRY_STACK_CLUSTER_BASE moves them); .stack/env then
# exports FERRY_CH_CLUSTER_URL (the first server) and FERRY_CH_CLUSTER.
# `down` stops it.
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
STACK="${FERRY_STACK_DIR:-$ROOT/.stack}"
case "$STACK" in /*) ;; *) STACK="$PWD/$STACK" ;; esac

PG_PORT="${FERRY_STACK_PG_PORT:-55432}"
CH_TCP_PORT="${FERRY_STACK_CH_PORT:-19000}"
CH_HTTP_PORT="${FERRY_STACK_CH_HTTP_PORT:-18123}"
CH_INTERSERVER_PORT="${FERRY_STACK_CH_INTERSERVER_PORT:-19009}"
CH_TLS_PORT="${FERRY_STACK_CH_TLS_PORT:-19440}"
HOST=127.0.0.1
TLS_DIR="$STACK/tls"

PG_BIN=/usr/lib/postgresql/15/bin
PG_USER_OS=postgres

CH_DIR="$STACK/ch"
CH_CONFIG="$CH_DIR/config.xml"
CH_PIDFILE="$CH_DIR/clickhouse.pid"

log() { printf '[stack] %s\n' "$*"; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# ---------------------------------------------------------------------------
# paths

# The default stack keys its data dir by the checkout's path, as it always
# did; a stack in another FERRY_STACK_DIR by that dir.
repo_hash() {
	local key="$ROOT"
	[ "$STACK" = "$ROOT/.stack" ] || key="$STACK"
	printf '%s' "$key" | sha256sum | cut -c1-12
}

# PG_BASE holds the PostgreSQL data dir, its socket dir and its log.
if is_root; then
	PG_BASE="/var/lib/ferry-stack/$(repo_hash)"
else
	PG_BASE="$STACK/pg-base"
	PG_USER_OS="$(id -un)"
fi
PG_DATA="$PG_BASE/pg"
PG_SOCK="$PG_BASE/run"
PG_LOG="$PG_BASE/postgresql.log"

# as_pg CMD ARGS...: run a command as the OS user that owns the cluster.
# It runs from / because the checkout may not be readable by that user.
as_pg() {
	if ! is_root; then
		"$@"
	elif command -v runuser >/dev/null 2>&1; then
		(cd / && runuser -u "$PG_USER_OS" -- "$@")
	else
		(cd / && su "$PG_USER_OS" -s /bin/sh -c "$(printf '%q ' "$@")")
	fi
}

# ---------------------------------------------------------------------------
# installation (fresh machines)

APT_UPDATED=0
apt_install() {
	is_root || die "missing packages ($*) and not root: install them yourself"
	command -v apt-get >/dev/null 2>&1 || die "missing packages ($*) and no apt-get"
	if [ "$APT_UPDATED" -eq 0 ]; then
		log "apt-get update"
		DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
		APT_UPDATED=1
	fi
	log "apt-get install $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"$@" </dev/null
}

ensure_pg_installed() {
	if [ ! -x "$PG_BIN/initdb" ] || [ ! -x "$PG_BIN/pg_ctl" ]; then
		# Do not let the Debian package create (and start) a cluster on 5432.
		if is_root; then
			mkdir -p /etc/postgresql-common/createcluster.d
			printf 'create_main_cluster = false\n' >/etc/postgresql-common/createcluster.d/ferry-stack.conf
		fi
		apt_install postgresql-15
	fi
	if [ ! -f /usr/share/postgresql/15/extension/pg_buffercache.control ] ||
		[ ! -f /usr/share/postgresql/15/extension/pgstattuple.control ]; then
		# Bookworm ships contrib inside postgresql-15; older releases split it.
		if apt-cache show postgresql-contrib-15 >/dev/null 2>&1; then
			apt_install postgresql-contrib-15
		else
			log "warning: pg_buffercache/pgstattuple not found and no postgresql-contrib-15 package"
		fi
	fi
	[ -x "$PG_BIN/initdb" ] || die "PostgreSQL 15 not found in $PG_BIN after install"
	if is_root && ! id "$PG_USER_OS" >/dev/null 2>&1; then
		die "OS user $PG_USER_OS does not exist"
	fi
}

ensure_ch_installed() {
	if ! command -v clickhouse-server >/dev/null 2>&1 || ! command -v clickhouse-client >/dev/null 2>&1; then
		apt_install clickhouse-server clickhouse-client
	fi
	command -v clickhouse-server >/dev/null 2>&1 || die "clickhouse-server not found after install"
}

# ensure_zk_installed: Debian's zookeeper package, for the cluster
# (CLUSTER=1) and deploy/clustertest. It installs the server's jars only, no
# service (zookeeperd would be one): deploy/cluster.sh and the test run
# ZooKeeper with their own config on their own ports.
ensure_zk_installed() {
	if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null 2>&1; then
		apt_install zookeeper
	fi
	[ -f /usr/share/java/zookeeper.jar ] || die "zookeeper.jar not found after installing zookeeper"
	# Should a package ever start one, a system ZooKeeper on 2181 is not ours.
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet zookeeper 2>/dev/null; then
		log "stopping and disabling the system zookeeper service (the stack runs its own)"
		systemctl disable --now zookeeper >/dev/null 2>&1 || true
	fi
}

# ---------------------------------------------------------------------------
# TLS: a self-signed CA and a server certificate for 127.0.0.1 and localhost,
# made once (and again when the server certificate is about to expire). Both
# servers use the same certificate; the CA is what clients trust.

tls_ensure() {
	if [ -s "$TLS_DIR/ca.crt" ] && [ -s "$TLS_DIR/server.key" ] &&
		openssl x509 -checkend 86400 -noout -in "$TLS_DIR/server.crt" >/dev/null 2>&1; then
		return 0
	fi
	command -v openssl >/dev/null 2>&1 || apt_install openssl
	log "making a self-signed test CA and a server certificate for $HOST and localhost in $TLS_DIR"
	mkdir -p "$TLS_DIR"
	(
		cd "$TLS_DIR"
		umask 077
		openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 \
			-subj "/CN=ferry-stack test CA" -keyout ca.key -out ca.crt >openssl.log 2>&1
		openssl req -new -nodes -newkey rsa:2048 -sha256 -subj "/CN=localhost" \
			-keyout server.key -out server.csr >>openssl.log 2>&1
		printf '%s\n' "subjectAltName=IP:$HOST,DNS:localhost" "basicConstraints=CA:FALSE" \
			"keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >server.ext
		openssl x509 -req -sha256 -days 825 -in server.csr -CA ca.crt -CAkey ca.key \
			-CAcreateserial -extfile server.ext -out server.crt >>openssl.log 2>&1
		chmod 644 ca.crt server.crt
	) || { cat "$TLS_DIR/openssl.log" >&2; die "making the TLS certificates failed"; }
}

# ---------------------------------------------------------------------------
# PostgreSQL

pg_running() {
	[ -f "$PG_DATA/PG_VERSION" ] || return 1
	as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

pg_ready() {
	"$PG_BIN/pg_isready" -q -h "$HOST" -p "$PG_PORT" -U postgres -d postgres >/dev/null 2>&1
}

pg_write_config() {
	cat >"$PG_DATA/ferry-stack.conf" <<EOF
# Generated by deploy/stack.sh on every start; do not edit.
listen_addresses = '$HOST'
port = $PG_PORT
unix_socket_directories = '$PG_SOCK'
max_connections = 200
shared_buffers = 256MB
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
fsync = on
ssl = on
ssl_cert_file = 'ferry-server.crt'
ssl_key_file = 'ferry-server.key'
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
EOF
	cat >"$PG_DATA/pg_hba.conf" <<'EOF'
# Generated by deploy/stack.sh: trust auth, local use only, except that
# members of ferry_password_auth (tests of password handling) need theirs.
# TYPE  DATABASE     USER                 ADDRESS       METHOD
host    all          +ferry_password_auth 127.0.0.1/32  scram-sha-256
host    replication  +ferry_password_auth 127.0.0.1/32  scram-sha-256
local   all          all                 trust
local   replication  all                 trust
host    all          all   127.0.0.1/32  trust
host    all          all   ::1/128       trust
host    replication  all   127.0.0.1/32  trust
host    replication  all   ::1/128       trust
EOF
	# PostgreSQL wants its key owned by its own user and unreadable by others.
	install -m 644 "$TLS_DIR/server.crt" "$PG_DATA/ferry-server.crt"
	install -m 600 "$TLS_DIR/server.key" "$PG_DATA/ferry-server.key"
	if ! grep -q "^include_if_exists 'ferry-stack.conf'" "$PG_DATA/postgresql.conf"; then
		printf "\ninclude_if_exists 'ferry-stack.conf'\n" >>"$PG_DATA/postgresql.conf"
	fi
	if is_root; then
		chown "$PG_USER_OS": "$PG_DATA/ferry-stack.conf" "$PG_DATA/pg_hba.conf" \
			"$PG_DATA/ferry-server.crt" "$PG_DATA/ferry-server.key"
	fi
	chmod 600 "$PG_DATA/ferry-stack.conf" "$PG_DATA/pg_hba.conf"
}

pg_init() {
	mkdir -p "$PG_BASE" "$PG_SOCK"
	if is_root; then
		chmod 755 "$(dirname "$PG_BASE")"
		chown "$PG_USER_OS": "$PG_BASE" "$PG_SOCK"
	fi
	chmod 700 "$PG_BASE"
	chmod 775 "$PG_SOCK"

	if [ ! -f "$PG_DATA/PG_VERSION" ]; then
		# A half-made data dir (initdb interrupted) is useless: start over.
		rm -rf "$PG_DATA"
		local locale=C
		if locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$'; then
			locale=C.UTF-8
		fi
		log "initdb $PG_DATA"
		as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust \
			--encoding=UTF8 --locale="$locale" >"$STACK/initdb.log" 2>&1 ||
			{ cat "$STACK/initdb.log" >&2; die "initdb failed"; }
	fi
	pg_write_config

	if [ -e "$STACK/pg" ] && [ ! -L "$STACK/pg" ]; then
		die "$STACK/pg exists and is not a symlink; move it away"
	fi
	ln -sfn "$PG_DATA" "$STACK/pg"
	ln -sfn "$PG_LOG" "$STACK/pg.log"
	printf '%s\n' "$PG_DATA" >"$STACK/pg.path"
}

pg_up() {
	ensure_pg_installed
	mkdir -p "$STACK"
	if pg_running && pg_ready; then
		log "postgres already running on $HOST:$PG_PORT"
		pg_init # refresh symlinks / pg.path
		# pg_hba.conf and ssl apply on a reload; the rest on the next restart.
		as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" reload >/dev/null || log "warning: postgres reload failed"
		return 0
	fi
	pg_init
	if pg_running; then
		log "postgres process alive but not ready yet; waiting"
	else
		if port_open "$PG_PORT"; then
			die "port $PG_PORT is taken by another process (not this checkout's postgres)"
		fi
		log "starting postgres on $HOST:$PG_PORT (data $PG_DATA)"
		# pg_ctl copes with a stale postmaster.pid left by a killed server.
		if ! detached as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 60 start >/dev/null; then
			tail -n 40 "$PG_LOG" >&2 || true
			die "postgres failed to start"
		fi
	fi

	for _ in $(seq 1 60); do
		pg_ready && break
		sleep 1
	done
	if ! pg_ready; then
		tail -n 40 "$PG_LOG" >&2 || true
		die "postgres does not accept connections on $HOST:$PG_PORT"
	fi
	log "postgres ready"
}

pg_down() {
	if [ -x "$PG_BIN/pg_ctl" ] && pg_running; then
		log "stopping postgres"
		as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null
	else
		log "postgres not running"
	fi
}

# ---------------------------------------------------------------------------
# ClickHouse

# ch_pid: prints the pid of this checkout's clickhouse-server, if it is alive.
# A pid file that survived a killed server (or whose pid was reused by some
# other process) does not count.
ch_pid() {
	[ -f "$CH_PIDFILE" ] || return 1
	local pid
	pid="$(tr -dc '0-9' <"$CH_PIDFILE")"
	[ -n "$pid" ] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$CH_CONFIG" || return 1
	printf '%s\n' "$pid"
}

ch_ready() {
	clickhouse-client --host "$HOST" --port "$CH_TCP_PORT" -q 'SELECT 1' >/dev/null 2>&1
}

ch_write_config() {
	mkdir -p "$CH_DIR"/{data,tmp,user_files,format_schemas,log}
	cat >"$CH_CONFIG" <<EOF
<?xml version="1.0"?>
<!-- Generated by deploy/stack.sh on every start; do not edit. -->
<yandex>
    <logger>
        <level>warning</level>
        <log>$CH_DIR/log/clickhouse-server.log</log>
        <errorlog>$CH_DIR/log/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>3</count>
    </logger>

    <tcp_port>$CH_TCP_PORT</tcp_port>
    <tcp_port_secure>$CH_TLS_PORT</tcp_port_secure>
    <openSSL>
        <server>
            <certificateFile>$TLS_DIR/server.crt</certificateFile>
            <privateKeyFile>$TLS_DIR/server.key</privateKeyFile>
            <verificationMode>none</verificationMode>
            <loadDefaultCAFile>false</loadDefaultCAFile>
            <cacheSessions>true</cacheSessions>
            <disableProtocols>sslv2,sslv3,tlsv1,tlsv1_1</disableProtocols>
            <preferServerCiphers>true</preferServerCiphers>
        </server>
    </openSSL>
    <http_port>$CH_HTTP_PORT</http_port>
    <interserver_http_port>$CH_INTERSERVER_PORT</interserver_http_port>
    <interserver_http_host>$HOST</interserver_http_host>
    <listen_host>$HOST</listen_host>

    <max_connections>1024</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mark_cache_size>536870912</mark_cache_size>

    <path>$CH_DIR/data/</path>
    <tmp_path>$CH_DIR/tmp/</tmp_path>
    <user_files_path>$CH_DIR/user_files/</user_files_path>
    <format_schema_path>$CH_DIR/format_schemas/</format_schema_path>

    <users_config>$CH_DIR/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mlock_executable>false</mlock_executable>

    <builtin_dictionaries_reload_interval>3600</builtin_dictionaries_reload_interval>
    <max_session_timeout>3600</max_session_timeout>
    <default_session_timeout>60</default_session_timeout>

    <!-- Tests drop tables freely. -->
    <max_table_size_to_drop>0</max_table_size_to_drop>
    <max_partition_size_to_drop>0</max_partition_size_to_drop>
</yandex>
EOF
	local CH_TEST_PASSWORD_SHA256
	CH_TEST_PASSWORD_SHA256="$(printf '%s' ferry-test-secret | sha256sum | cut -c1-64)"
	cat >"$CH_DIR/users.xml" <<EOF
<?xml version="1.0"?>
<!-- Generated by deploy/stack.sh on every start; do not edit. -->
<yandex>
    <profiles>
        <default>
            <max_memory_usage>10000000000</max_memory_usage>
            <use_uncompressed_cache>0</use_uncompressed_cache>
            <load_balancing>random</load_balancing>
        </default>
        <readonly>
            <readonly>1</readonly>
        </readonly>
    </profiles>
    <users>
        <!-- For tests of password handling; the password is ferry-test-secret. -->
        <ferry_secret>
            <password_sha256_hex>$CH_TEST_PASSWORD_SHA256</password_sha256_hex>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </ferry_secret>
        <default>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
EOF
}

# detached CMD ARGS...: run CMD (which starts a daemon) with stdin from
# /dev/null and no inherited descriptors besides 0-2, so that a caller reading
# our output through a pipe (CI) is not kept waiting by the server.
detached() {
	(
		for fd in "/proc/$BASHPID/fd/"*; do
			fd="${fd##*/}"
			if [ "$fd" -gt 2 ] 2>/dev/null && [ "$fd" -ne 255 ]; then
				eval "exec $fd>&-" 2>/dev/null || true
			fi
		done
		"$@" </dev/null
	)
}

ch_spawn() {
	(
		cd "$CH_DIR"
		detached setsid clickhouse-server --config-file="$CH_CONFIG" \
			--pid-file="$CH_PIDFILE" --daemon \
			>>"$CH_DIR/log/stdout.log" 2>&1
	)
}

ch_up() {
	ensure_ch_installed
	mkdir -p "$STACK"
	local pid
	if pid="$(ch_pid)" && ch_ready; then
		log "clickhouse already running on $HOST:$CH_TCP_PORT (pid $pid)"
		ch_write_config # users.xml applies at once; config.xml on the next restart
		return 0
	fi
	if pid="$(ch_pid)"; then
		log "clickhouse process $pid alive but not ready yet; waiting"
	else
		rm -f "$CH_PIDFILE"
		for p in "$CH_TCP_PORT" "$CH_HTTP_PORT" "$CH_INTERSERVER_PORT" "$CH_TLS_PORT"; do
			if port_open "$p"; then
				die "port $p is taken by another process (not this checkout's clickhouse)"
			fi
		done
		ch_write_config
		log "starting clickhouse on $HOST:$CH_TCP_PORT (config $CH_CONFIG)"
		: >"$CH_DIR/log/clickhouse-server.err.log"
		ch_spawn || true
	fi

	for _ in $(seq 1 60); do
		ch_ready && break
		sleep 1
	done
	if ! ch_ready; then
		log "clickhouse did not answer within 60 s; last lines of its logs:" >&2
		tail -n 40 "$CH_DIR/log/clickhouse-server.err.log" >&2 2>/dev/null || true
		tail -n 20 "$CH_DIR/log/stdout.log" >&2 2>/dev/null || true
		die "clickhouse failed to start"
	fi
	if ! pid="$(ch_pid)"; then
		die "clickhouse answers on $HOST:$CH_TCP_PORT but not from the pid in $CH_PIDFILE"
	fi
	log "clickhouse ready (pid $pid)"
}

ch_down() {
	local pid
	if ! pid="$(ch_pid)"; then
		log "clickhouse not running"
		rm -f "$CH_PIDFILE"
		return 0
	fi
	log "stopping clickhouse (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 300); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "clickhouse still alive after 30 s; killing"
		kill -KILL "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -f "$CH_PIDFILE"
}

# ---------------------------------------------------------------------------

# ClickHouse 26.7 from libchdb: clickhouse-local serving the native and HTTP
# protocols (deploy/chdb/launcher.c), kept up by a supervisor that restarts
# it when the process dies and counts every restart in $CHM_DIR/restarts.log.

CHDB_VERSION=26.7.3-stable.1
CHDB_TGZ_SHA256=c0d32b129e988f2b9a9a31c9141aecf5e1e2453f9a079efc4d36ab8e3f92b2ad
if is_root; then
	CHDB_CACHE="${FERRY_CHDB_CACHE:-/var/cache/ferry-chdb}"
else
	CHDB_CACHE="${FERRY_CHDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry-chdb}"
fi
CHDB_LIB="$CHDB_CACHE/$CHDB_VERSION/libchdb.so"
CHM_TCP_PORT="${FERRY_STACK_CHM_PORT:-29000}"
CHM_HTTP_PORT="${FERRY_STACK_CHM_HTTP_PORT:-28123}"
CHM_INNER_PORT="${FERRY_STACK_CHM_INNER_PORT:-$((CHM_TCP_PORT + 1))}" # the server's own native port, behind the shield
CHM_DIR="$STACK/chm"
CHM_BIN="$CHM_DIR/chdb-server"
CHM_PIDFILE="$CHM_DIR/supervisor.pid"

# chdb_fetch: the pinned libchdb in the cache, downloaded once with npm and
# checked against the tarball's pinned SHA-256.
chdb_fetch() {
	[ -s "$CHDB_LIB" ] && return 0
	command -v npm >/dev/null 2>&1 || apt_install npm
	local tmp
	tmp="$(mktemp -d)"
	log "fetching @chdb/lib-linux-x64-gnu@$CHDB_VERSION (ClickHouse 26.7, ~180 MB) into $CHDB_CACHE"
	(cd "$tmp" && npm pack --silent "@chdb/lib-linux-x64-gnu@$CHDB_VERSION" >npm.log 2>&1) ||
		{ cat "$tmp/npm.log" >&2; rm -rf "$tmp"; die "npm pack @chdb/lib-linux-x64-gnu@$CHDB_VERSION failed"; }
	local tgz="$tmp/chdb-lib-linux-x64-gnu-$CHDB_VERSION.tgz"
	if [ "$(sha256sum "$tgz" | cut -c1-64)" != "$CHDB_TGZ_SHA256" ]; then
		rm -rf "$tmp"
		die "the downloaded libchdb tarball does not have the pinned SHA-256 $CHDB_TGZ_SHA256"
	fi
	mkdir -p "$CHDB_CACHE/$CHDB_VERSION"
	tar -xzf "$tgz" -C "$tmp" package/libchdb.so
	mv "$tmp/package/libchdb.so" "$CHDB_LIB.part"
	mv "$CHDB_LIB.part" "$CHDB_LIB"
	rm -rf "$tmp"
}

# chdb_build: the launcher (C, dlopen) and the shield (Go) that relays the
# native port to it; see deploy/chdb/README.md for why the shield is there.
chdb_build() {
	local src="$ROOT/deploy/chdb/launcher.c"
	mkdir -p "$CHM_DIR"
	if ! [ -x "$CHM_BIN" ] || ! [ "$CHM_BIN" -nt "$src" ]; then
		command -v cc >/dev/null 2>&1 || apt_install gcc libc6-dev
		cc -O2 -Wall -o "$CHM_BIN" "$src" -ldl || die "building $src failed"
	fi
	(cd "$ROOT" && go build -o "$CHM_DIR/shield" ./deploy/chdb/shield) || die "building deploy/chdb/shield failed"
}

chm_supervisor_pid() {
	local pid
	[ -f "$CHM_PIDFILE" ] && pid="$(tr -dc '0-9' <"$CHM_PIDFILE")" && [ -n "$pid" ] &&
		kill -0 "$pid" 2>/dev/null && grep -qF chm-supervise "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

chm_ready() {
	clickhouse-client --host "$HOST" --port "$CHM_TCP_PORT" -q 'SELECT 1' >/dev/null 2>&1
}

chm_write_config() {
	mkdir -p "$CHM_DIR"/{data,log}
	cat >"$CHM_DIR/config.xml" <<XML
<?xml version="1.0"?>
<!-- Generated by deploy/stack.sh on every start; do not edit. -->
<clickhouse>
    <logger>
        <level>warning</level>
        <log>$CHM_DIR/log/clickhouse.log</log>
        <errorlog>$CHM_DIR/log/clickhouse.err.log</errorlog>
        <size>100M</size>
        <count>3</count>
    </logger>
    <timezone>UTC</timezone>
    <users_config>$CHM_DIR/users.xml</users_config>
    <max_table_size_to_drop>0</max_table_size_to_drop>
    <max_partition_size_to_drop>0</max_partition_size_to_drop>
</clickhouse>
XML
	sed -e 's/<yandex>/<clickhouse>/; s#</yandex>#</clickhouse>#' "$CH_DIR/users.xml" >"$CHM_DIR/users.xml"
}

# chm_supervise: runs in its own session; starts the server again after it
# dies, until $CHM_DIR/stop exists.
chm_supervise() {
	local query="SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; SELECT sleepEachRow(1) FROM system.numbers SETTINGS max_block_size = 1 FORMAT Null"
	local rc
	echo $$ >"$CHM_PIDFILE"
	"$CHM_DIR/shield" -listen "$HOST:$CHM_TCP_PORT" -upstream "$HOST:$CHM_INNER_PORT" \
		-user default= -user ferry_secret=ferry-test-secret >>"$CHM_DIR/log/shield.log" 2>&1 &
	while [ ! -e "$CHM_DIR/stop" ]; do
		rc=0
		"$CHM_BIN" "$CHDB_LIB" --config-file="$CHM_DIR/config.xml" --path="$CHM_DIR/data/" \
			--listen_host="$HOST" --tcp_port="$CHM_INNER_PORT" --http_port="$CHM_HTTP_PORT" \
			--query "$query" >>"$CHM_DIR/log/stdout.log" 2>&1 || rc=$?
		[ -e "$CHM_DIR/stop" ] && break
		printf '%s exited %s; restarting\n' "$(date -u +%FT%TZ)" "$rc" >>"$CHM_DIR/restarts.log"
		sleep 1
	done
}

chm_up() {
	mkdir -p "$CHM_DIR"
	if chm_supervisor_pid >/dev/null && chm_ready; then
		log "clickhouse 26.7 already running on $HOST:$CHM_TCP_PORT"
		chm_write_config
		return 0
	fi
	chdb_fetch
	chdb_build
	if ! chm_supervisor_pid >/dev/null; then
		for p in "$CHM_TCP_PORT" "$CHM_INNER_PORT" "$CHM_HTTP_PORT"; do
			port_open "$p" && die "port $p is taken by another process (not this checkout's clickhouse 26.7)"
		done
		chm_write_config
		rm -f "$CHM_DIR/stop"
		log "starting clickhouse 26.7 (libchdb $CHDB_VERSION) on $HOST:$CHM_TCP_PORT, http $CHM_HTTP_PORT"
		rm -f "$CHM_PIDFILE"
		FERRY_STACK_DIR="$STACK" detached setsid bash "$ROOT/deploy/stack.sh" chm-supervise >>"$CHM_DIR/log/stdout.log" 2>&1 &
	fi
	for _ in $(seq 1 120); do
		chm_ready && break
		sleep 0.5
	done
	if ! chm_ready; then
		tail -n 20 "$CHM_DIR/log/stdout.log" >&2 2>/dev/null || true
		die "clickhouse 26.7 did not answer on $HOST:$CHM_TCP_PORT within 60 s"
	fi
	log "clickhouse 26.7 ready ($(clickhouse-client --host "$HOST" --port "$CHM_TCP_PORT" -q 'SELECT version()'))"
}

chm_down() {
	local pid
	if ! pid="$(chm_supervisor_pid)"; then
		log "clickhouse 26.7 not running"
		rm -f "$CHM_PIDFILE"
		return 0
	fi
	log "stopping clickhouse 26.7"
	touch "$CHM_DIR/stop"
	# The supervisor leads its own session: TERM reaches it and the server.
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		port_open "$CHM_TCP_PORT" || port_open "$CHM_INNER_PORT" || break
		sleep 0.1
	done
	if port_open "$CHM_TCP_PORT" || port_open "$CHM_INNER_PORT"; then
		kill -KILL -- "-$pid" 2>/dev/null || true
	fi
	rm -f "$CHM_PIDFILE"
}

# ---------------------------------------------------------------------------

# kfake: with KAFKA=1, an in-memory TEST broker (deploy/kfake, not Kafka:
# nothing survives its stop) on 127.0.0.1:19092, for ferry run --sink kafka.

KAFKA_PORT="${FERRY_STACK_KAFKA_PORT:-19092}"
KFAKE_DIR="$STACK/kfake"
KFAKE_PIDFILE="$KFAKE_DIR/kfake.pid"

kfake_pid() {
	local pid
	[ -f "$KFAKE_PIDFILE" ] && pid="$(cat "$KFAKE_PIDFILE")" && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

kfake_up() {
	if kfake_pid >/dev/null; then
		log "kfake (TEST broker) already running on $HOST:$KAFKA_PORT"
		return
	fi
	port_open "$KAFKA_PORT" && die "port $KAFKA_PORT is taken by something else"
	mkdir -p "$KFAKE_DIR"
	log "building and starting kfake, an in-memory TEST broker, on $HOST:$KAFKA_PORT"
	(cd "$ROOT" && go build -o "$KFAKE_DIR/kfake" ./deploy/kfake)
	nohup "$KFAKE_DIR/kfake" -port "$KAFKA_PORT" >"$KFAKE_DIR/kfake.log" 2>&1 &
	echo $! >"$KFAKE_PIDFILE"
	for _ in $(seq 1 50); do
		port_open "$KAFKA_PORT" && return
		sleep 0.1
	done
	die "kfake did not start; see $KFAKE_DIR/kfake.log"
}

kfake_down() {
	local pid
	if pid="$(kfake_pid)"; then
		log "stopping kfake (TEST broker, pid $pid)"
		kill "$pid" 2>/dev/null || true
	fi
	rm -f "$KFAKE_PIDFILE"
}

# ---------------------------------------------------------------------------

pg_serves_tls() {
	[ "$("$PG_BIN/psql" -X -w -tA -h "$HOST" -p "$PG_PORT" -U postgres -d postgres -c 'SHOW ssl' 2>/dev/null)" = on ]
}

write_env() {
	cat >"$STACK/env" <<EOF
export FERRY_PG_URL=postgres://postgres@$HOST:$PG_PORT/postgres?sslmode=disable
export FERRY_CH_URL=clickhouse://default@$HOST:$CHM_TCP_PORT/default # ClickHouse 26.7
export FERRY_CH_MODERN_URL=clickhouse://default@$HOST:$CHM_TCP_PORT/default
export FERRY_CH_LEGACY_URL=clickhouse://default@$HOST:$CH_TCP_PORT/default # ClickHouse 18.16
export FERRY_CHDB_LIB='$CHDB_LIB' FERRY_CHDB_LAUNCHER='$CHM_BIN' FERRY_CHDB_SHIELD='$CHM_DIR/shield' # for private 26.7 servers (chaos suite)
EOF
	# A user whose password is asked for, for tests of password handling.
	echo "export FERRY_CH_SECRET_URL=clickhouse://ferry_secret@$HOST:$CHM_TCP_PORT/default # password ferry-test-secret" >>"$STACK/env"
	echo "export FERRY_CH_LEGACY_SECRET_URL=clickhouse://ferry_secret@$HOST:$CH_TCP_PORT/default # password ferry-test-secret" >>"$STACK/env"
	if pg_serves_tls && port_open "$CH_TLS_PORT"; then
		cat >>"$STACK/env" <<EOF
export FERRY_TLS_CA='$TLS_DIR/ca.crt' # the stack's self-signed test CA
export FERRY_PG_TLS_URL='postgres://postgres@$HOST:$PG_PORT/postgres?sslmode=verify-full&sslrootcert=$TLS_DIR/ca.crt'
export FERRY_CH_TLS_URL='clickhouse://default@$HOST:$CH_TLS_PORT/default?secure=true' # 18.16 (26.7 from libchdb serves no TLS); with --ch-ca-file \$FERRY_TLS_CA
EOF
	else
		log "warning: PostgreSQL or ClickHouse serves no TLS yet (started by an older stack.sh?): restart the stack for FERRY_*_TLS_URL"
	fi
	if FERRY_STACK_DIR="$STACK" bash "$ROOT/deploy/cluster.sh" status >/dev/null 2>&1; then
		echo "export FERRY_CH_CLUSTER_URL=clickhouse://default@$HOST:$((${FERRY_STACK_CLUSTER_BASE:-19100} + 10))/default # ClickHouse 18.16, cluster s1r1" >>"$STACK/env"
		echo "export FERRY_CH_CLUSTER=ferry_cluster" >>"$STACK/env"
	fi
	if kfake_pid >/dev/null; then
		echo "export FERRY_KAFKA_BROKERS=$HOST:$KAFKA_PORT # kfake, an in-memory TEST broker" >>"$STACK/env"
	fi
}

cmd_up() {
	mkdir -p "$STACK"
	tls_ensure
	pg_up
	ch_up
	chm_up
	if [ "${KAFKA:-0}" = 1 ]; then
		kfake_up
	fi
	# deploy/clustertest (in make test) needs ZooKeeper installed, not running.
	if [ "${CLUSTER:-0}" = 1 ] || is_root; then
		ensure_zk_installed
	elif [ ! -f /usr/share/java/zookeeper.jar ]; then
		log "warning: no zookeeper package (not root, so not installed): deploy/clustertest will skip"
	fi
	# kcat, an independent Kafka client, reads what the Kafka tests produce.
	if ! command -v kcat >/dev/null 2>&1; then
		if is_root; then
			apt_install kcat
		else
			log "warning: no kcat (not root, so not installed): loader/kafka's kcat test will skip"
		fi
	fi
	# Debian's chromium, headless, loads ferry's status page in cmd/ferry's
	# TestStatusPage (which fails without it under CI=true).
	if ! command -v chromium >/dev/null 2>&1; then
		if is_root; then
			apt_install chromium
		else
			log "warning: no chromium (not root, so not installed): cmd/ferry's status page test will skip"
		fi
	fi
	if [ "${CLUSTER:-0}" = 1 ]; then
		FERRY_STACK_DIR="$STACK" bash "$ROOT/deploy/cluster.sh" up
	fi
	write_env
	log "stack up; use: . $STACK/env"
}

cmd_down() {
	FERRY_STACK_DIR="$STACK" bash "$ROOT/deploy/cluster.sh" down
	kfake_down
	chm_down
	ch_down
	pg_down
	log "stack down"
}

cmd_purge() {
	cmd_down
	log "removing $PG_BASE and $STACK"
	rm -rf -- "$PG_BASE" "$STACK"
}

cmd_status() {
	local rc=0 pid
	if [ -x "$PG_BIN/pg_ctl" ] && pg_running; then
		if pg_ready; then
			log "postgres:   running on $HOST:$PG_PORT (data $PG_DATA)"
		else
			log "postgres:   process alive but not accepting connections on $HOST:$PG_PORT"
			rc=3
		fi
	else
		log "postgres:   not running"
		rc=3
	fi
	if pid="$(ch_pid)"; then
		if ch_ready; then
			log "clickhouse: running on $HOST:$CH_TCP_PORT, TLS $CH_TLS_PORT, http $CH_HTTP_PORT (pid $pid)"
		else
			log "clickhouse: process $pid alive but not answering on $HOST:$CH_TCP_PORT"
			rc=3
		fi
	else
		log "clickhouse: not running"
		rc=3
	fi
	if chm_supervisor_pid >/dev/null && chm_ready; then
		log "clickhouse 26.7: running on $HOST:$CHM_TCP_PORT, http $CHM_HTTP_PORT ($(cat "$CHM_DIR/restarts.log" 2>/dev/null | wc -l) restarts)"
	else
		log "clickhouse 26.7: not running"
		rc=3
	fi
	if [ -d "$STACK/cluster" ]; then
		FERRY_STACK_DIR="$STACK" bash "$ROOT/deploy/cluster.sh" status || true
	fi
	if pid="$(kfake_pid)"; then
		log "kfake:      TEST broker running on $HOST:$KAFKA_PORT (pid $pid)"
	fi
	[ -f "$STACK/env" ] && log "env file:   $STACK/env"
	return "$rc"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
purge) cmd_purge ;;
chm-supervise) chm_supervise ;;
chm-up) chm_up ;;     # the 26.7 server alone
chm-down) chm_down ;; # the 26.7 server alone
*)
	echo "usage: $0 up|down|status|purge" >&2
	exit 2
	;;
esac
