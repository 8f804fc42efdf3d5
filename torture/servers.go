package torture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"
)

// Private is a PostgreSQL cluster and a ClickHouse server of torture's
// own, on free loopback ports, that restart faults stop and start. The
// shared stack is never restarted: make test runs other packages' tests
// against it at the same time. One Private serves every restart round of
// a run (a round's databases are its own, as on the stack).
type Private struct {
	pg *pgServer
	ch *chServer
}

// CHDB names the local stack's libchdb-hosted ClickHouse 26.7 (the
// FERRY_CHDB_* variables of .stack/env): the library, the launcher that
// runs it as a server, and the shield in front of its native port.
type CHDB struct{ Lib, Launcher, Shield string }

// StartPrivate initdbs and starts a PostgreSQL cluster (as the postgres
// user, so it needs root) and starts a ClickHouse server: clickhouse-server
// (18.16 from Debian) when chdb is nil, else the libchdb-hosted 26.7. A
// watchdog stops both and removes their files once this process is gone,
// however it ends.
func StartPrivate(chdb *CHDB) (*Private, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("private servers need root (PostgreSQL runs as the postgres user)")
	}
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	if chdb == nil {
		if _, err := exec.LookPath("clickhouse-server"); err != nil {
			return nil, errors.New("no clickhouse-server (Debian's clickhouse-server package)")
		}
	} else {
		for _, f := range []string{chdb.Lib, chdb.Launcher, chdb.Shield} {
			if _, err := os.Stat(f); f == "" || err != nil {
				return nil, fmt.Errorf("libchdb host incomplete (FERRY_CHDB_LIB, FERRY_CHDB_LAUNCHER, FERRY_CHDB_SHIELD from .stack/env): %q missing", f)
			}
		}
	}
	pg, err := startPG(bin)
	if err != nil {
		return nil, fmt.Errorf("private PostgreSQL: %w", err)
	}
	c, err := startCH(chdb)
	if err != nil {
		pg.stop()
		return nil, fmt.Errorf("private ClickHouse: %w", err)
	}
	return &Private{pg: pg, ch: c}, nil
}

// Servers are the private pair as a round's servers, with srv's binary.
func (pv *Private) Servers(srv Servers) Servers {
	return Servers{PG: pv.pg.url(), CH: pv.ch.url(), Ferry: srv.Ferry, Legacy: srv.Legacy, Private: pv}
}

// Close stops both servers and removes their files.
func (pv *Private) Close() {
	pv.pg.stop()
	pv.ch.stop()
}

// ensureUp starts whichever server a failed round left down.
func (pv *Private) ensureUp() error {
	if err := pv.pg.ensureUp(); err != nil {
		return err
	}
	return pv.ch.ensureUp()
}

// pgServer is a private PostgreSQL cluster, run as the postgres user.
type pgServer struct {
	bin, dir string
	port     int
}

func pgBinDir() (string, error) {
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	for _, v := range []string{"17", "16", "15", "14"} {
		dirs = append(dirs, "/usr/lib/postgresql/"+v+"/bin")
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no initdb (PostgreSQL's server package)")
}

// startPG makes the cluster under /var/tmp, which the postgres user can
// enter (a test's temp dir may sit in a home it cannot).
func startPG(bin string) (*pgServer, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("no postgres user: %w", err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "ferry-torture-pg-")
	if err != nil {
		return nil, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	p := &pgServer{bin: bin, dir: dir}
	if p.port, err = freePort(); err != nil {
		return nil, err
	}
	stop := shellQuote(filepath.Join(bin, "pg_ctl"), "-D", dir+"/data", "stop", "-m", "immediate")
	watchdog("su postgres -s /bin/sh -c " + shellQuote(stop) + " >/dev/null 2>&1 </dev/null; rm -rf " + shellQuote(dir))
	if err := asPostgres(filepath.Join(bin, "initdb"), "-D", dir+"/data", "-A", "trust", "-U", "postgres", "-E", "UTF8"); err != nil {
		return nil, err
	}
	// As the stack's: logical decoding, room for the rounds' slots.
	conf := fmt.Sprintf("port = %d\nunix_socket_directories = '%s'\nlisten_addresses = '127.0.0.1'\n"+
		"wal_level = logical\nmax_replication_slots = 16\nmax_wal_senders = 16\nmax_connections = 100\n"+
		"shared_buffers = 64MB\nlog_min_messages = warning\n", p.port, dir)
	if err := asPostgres("sh", "-c", "cat >> "+dir+"/data/postgresql.conf <<'EOF'\n"+conf+"EOF"); err != nil {
		return nil, err
	}
	return p, p.ctl("start", "-w", "-t", "120", "-l", dir+"/server.log")
}

func (p *pgServer) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// restart stops the cluster the way pg_ctl's mode does (fast: SIGINT,
// immediate: SIGQUIT, a crash that leaves WAL recovery to the start), by
// signalling the postmaster directly so that the stop lands when the
// fault's trigger fired, not a shell's start-up later; then starts it.
func (p *pgServer) restart(mode string) error {
	sig := syscall.SIGINT
	if mode == "immediate" {
		sig = syscall.SIGQUIT
	}
	pid, err := p.postmaster()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal the postmaster: %w", err)
	}
	for deadline := time.Now().Add(2 * time.Minute); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL (pid %d) still running 2 minutes after a %s shutdown", pid, mode)
		}
	}
	return p.ctl("start", "-w", "-t", "120", "-l", p.dir+"/server.log")
}

func (p *pgServer) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(p.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("PostgreSQL is not running: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

func (p *pgServer) ensureUp() error {
	if p.ctl("status") == nil {
		return nil
	}
	return p.ctl("start", "-w", "-t", "120", "-l", p.dir+"/server.log")
}

func (p *pgServer) stop() {
	_ = p.ctl("stop", "-m", "immediate")
	os.RemoveAll(p.dir)
}

// ctl runs pg_ctl with its output in a file: the server it starts keeps
// that output open, so a pipe would never reach EOF.
func (p *pgServer) ctl(args ...string) error {
	full := append([]string{filepath.Join(p.bin, "pg_ctl"), "-D", p.dir + "/data"}, args...)
	if err := asPostgres("sh", "-c", shellQuote(full...)+" >>"+p.dir+"/ctl.log 2>&1 </dev/null"); err != nil {
		out, _ := os.ReadFile(p.dir + "/ctl.log")
		return fmt.Errorf("pg_ctl %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 5))
	}
	return nil
}

func asPostgres(args ...string) error {
	cmd := exec.Command("su", "postgres", "-s", "/bin/sh", "-c", shellQuote(args...))
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", args[0], err, out)
	}
	return nil
}

// chServer is a private ClickHouse server. The libchdb-hosted one runs as
// the stack runs it (deploy/chdb): the shield on the public port in front
// of the launcher, both in one process group, which a stop signals whole.
type chServer struct {
	dir        string
	tcp, inner int
	http       int
	chdb       *CHDB
	cmd        *exec.Cmd
	exited     chan struct{}
}

func startCH(chdb *CHDB) (*chServer, error) {
	dir, err := os.MkdirTemp("", "ferry-torture-ch-")
	if err != nil {
		return nil, err
	}
	c := &chServer{dir: dir, chdb: chdb}
	for _, port := range []*int{&c.tcp, &c.inner, &c.http} {
		if *port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if err := c.writeConfig(); err != nil {
		return nil, err
	}
	pidFile := shellQuote(filepath.Join(dir, "pid"))
	watchdog("[ -s " + pidFile + " ] && kill -KILL -- \"-$(cat " + pidFile + ")\"; rm -rf " + shellQuote(dir))
	return c, c.start()
}

func (c *chServer) writeConfig() error {
	for _, d := range []string{"data", "tmp", "user_files", "log"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return err
		}
	}
	root := "yandex"
	body := fmt.Sprintf(`    <tcp_port>%[2]d</tcp_port>
    <http_port>%[3]d</http_port>
    <listen_host>127.0.0.1</listen_host>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <user_files_path>%[1]s/user_files/</user_files_path>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mlock_executable>false</mlock_executable>
    <mark_cache_size>67108864</mark_cache_size>
    <uncompressed_cache_size>0</uncompressed_cache_size>
`, c.dir, c.tcp, c.http)
	if c.chdb != nil {
		// clickhouse-local takes its ports and path from the command line
		// and wants <clickhouse> as the root element.
		root, body = "clickhouse", ""
	}
	config := fmt.Sprintf(`<?xml version="1.0"?>
<%[1]s>
    <logger><level>warning</level><log>%[2]s/log/server.log</log><errorlog>%[2]s/log/error.log</errorlog></logger>
    <users_config>%[2]s/users.xml</users_config>
    <timezone>UTC</timezone>
    <max_table_size_to_drop>0</max_table_size_to_drop>
%[3]s</%[1]s>
`, root, c.dir, body)
	users := fmt.Sprintf(`<?xml version="1.0"?>
<%[1]s>
    <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
    <quotas><default></default></quotas>
</%[1]s>
`, root)
	if err := os.WriteFile(filepath.Join(c.dir, "config.xml"), []byte(config), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dir, "users.xml"), []byte(users), 0o644)
}

func (c *chServer) command() *exec.Cmd {
	if c.chdb == nil {
		return exec.Command("clickhouse-server", "--config-file="+filepath.Join(c.dir, "config.xml"))
	}
	// The query starts the listeners and then never ends, so the process
	// serves until it is stopped (deploy/chdb/README.md).
	query := "SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; SELECT sleepEachRow(1) FROM system.numbers SETTINGS max_block_size = 1 FORMAT Null"
	shield := shellQuote(c.chdb.Shield, "-listen", fmt.Sprintf("127.0.0.1:%d", c.tcp), "-upstream", fmt.Sprintf("127.0.0.1:%d", c.inner), "-user", "default=")
	server := shellQuote(c.chdb.Launcher, c.chdb.Lib, "--config-file="+filepath.Join(c.dir, "config.xml"),
		"--path="+filepath.Join(c.dir, "data")+"/", "--listen_host=127.0.0.1",
		fmt.Sprintf("--tcp_port=%d", c.inner), fmt.Sprintf("--http_port=%d", c.http), "--query", query)
	return exec.Command("bash", "-c", shield+" & exec "+server)
}

// start runs the server and waits until it answers.
func (c *chServer) start() error {
	logf, err := os.OpenFile(filepath.Join(c.dir, "log", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := c.command()
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	c.cmd, c.exited = cmd, make(chan struct{})
	_ = os.WriteFile(filepath.Join(c.dir, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(c.exited)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		err := c.ping()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ClickHouse did not answer on port %d: %w", c.tcp, err)
		}
		select {
		case <-c.exited:
			out, _ := os.ReadFile(filepath.Join(c.dir, "log", "error.log"))
			return fmt.Errorf("ClickHouse exited at start:\n%s", tail(string(out), 10))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *chServer) ping() error {
	conn, err := ch.Open(&ch.Options{Addr: []string{fmt.Sprintf("127.0.0.1:%d", c.tcp)}, DialTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return conn.Ping(ctx)
}

func (c *chServer) url() string {
	return fmt.Sprintf("clickhouse://default@127.0.0.1:%d/default", c.tcp)
}

// restart stops the server, with SIGTERM (clickhouse-server shuts down in
// order) or SIGKILL (a crash), and starts it again.
func (c *chServer) restart(crash bool) error {
	if c.cmd == nil {
		return c.start()
	}
	sig := syscall.SIGTERM
	if crash {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	select {
	case <-c.exited:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
	// SIGTERM ends the server, not necessarily the shield beside it.
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	c.cmd = nil
	return c.start()
}

func (c *chServer) running() bool {
	if c.cmd == nil {
		return false
	}
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

func (c *chServer) ensureUp() error {
	if c.running() {
		return nil
	}
	return c.start()
}

func (c *chServer) stop() {
	if c.cmd != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
		c.cmd = nil
	}
	os.RemoveAll(c.dir)
}

// watchdog runs cleanup (a shell command) once this process is gone: a
// test binary killed by its timeout runs no cleanup of its own, and a
// server left running would hold its port and disk.
func watchdog(cleanup string) {
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 2; done; %s", os.Getpid(), cleanup)
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		go func() { _ = cmd.Wait() }()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func shellQuote(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// connectRetry connects to PostgreSQL, waiting out a restart.
func connectRetry(ctx context.Context, url string, wait time.Duration) (*pgx.Conn, error) {
	deadline := time.Now().Add(wait)
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return conn, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
