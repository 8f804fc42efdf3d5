package chaostest

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

// pgServer is a PostgreSQL cluster of the suite's own, run as the
// postgres user (PostgreSQL refuses to run as root).
type pgServer struct {
	bin  string // PostgreSQL's server binaries
	dir  string // data, socket and logs; readable by the postgres user
	port int
}

// pgBinDir finds initdb and pg_ctl.
func pgBinDir() (string, error) {
	dirs := []string{}
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
	return "", errors.New("no initdb found (install PostgreSQL's server package)")
}

// startPG initdbs a cluster in a new directory and starts it on a free
// loopback port. The directory is under /var/tmp: the test's own temp dir
// may sit in a home directory the postgres user cannot enter.
func startPG(bin string) (*pgServer, error) {
	pgUser, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("no postgres user: %w", err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "ferry-chaos-pg-")
	if err != nil {
		return nil, err
	}
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &pgServer{bin: bin, dir: dir, port: port}
	if err := p.asPostgres(filepath.Join(bin, "initdb"), "-D", dir+"/data", "-A", "trust", "-U", "postgres", "-E", "UTF8"); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("port = %d\nunix_socket_directories = '%s'\nlisten_addresses = '127.0.0.1'\n"+
		"wal_level = logical\nmax_replication_slots = 16\nmax_wal_senders = 16\nmax_connections = 100\n"+
		"shared_buffers = 64MB\nlog_min_messages = warning\n", port, dir)
	if err := p.asPostgres("sh", "-c", "cat >> "+dir+"/data/postgresql.conf <<'EOF'\n"+conf+"EOF"); err != nil {
		return nil, err
	}
	if err := p.ctl("start", "-w", "-t", "60", "-l", dir+"/server.log"); err != nil {
		return nil, err
	}
	stop := shellQuote([]string{filepath.Join(bin, "pg_ctl"), "-D", dir + "/data", "stop", "-m", "immediate"})
	watchdog("su postgres -s /bin/sh -c " + shellQuote([]string{stop}) + " >/dev/null 2>&1 </dev/null; rm -rf " + shellQuote([]string{dir}))
	return p, nil
}

// watchdog runs cleanup (a shell command) once this test process is gone,
// however it ended: a test binary killed by its timeout runs no cleanup of
// its own, and a server left running would hold its port and disk.
func watchdog(cleanup string) {
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 2; done; %s", os.Getpid(), cleanup)
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		go func() { _ = cmd.Wait() }()
	}
}

// url is the connection URL of a database, directly or through a proxy at addr.
func (p *pgServer) url(addr, db string) string {
	if addr == "" {
		addr = fmt.Sprintf("127.0.0.1:%d", p.port)
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", addr, db)
}

// restart stops the cluster in the given mode (fast or immediate) and starts it.
func (p *pgServer) restart(mode string) error {
	return p.ctl("restart", "-w", "-t", "60", "-m", mode, "-l", p.dir+"/server.log")
}

// ensureUp starts the cluster if a failed scenario left it down.
func (p *pgServer) ensureUp() error {
	if p.ctl("status") == nil {
		return nil
	}
	return p.ctl("start", "-w", "-t", "60", "-l", p.dir+"/server.log")
}

func (p *pgServer) stop() {
	_ = p.ctl("stop", "-m", "immediate")
	os.RemoveAll(p.dir)
}

// ctl runs pg_ctl with its output in a file: the server it starts keeps
// pg_ctl's output open, so a pipe would never reach EOF.
func (p *pgServer) ctl(args ...string) error {
	full := append([]string{filepath.Join(p.bin, "pg_ctl"), "-D", p.dir + "/data"}, args...)
	err := p.asPostgres("sh", "-c", shellQuote(full)+" >>"+p.dir+"/ctl.log 2>&1 </dev/null")
	if err != nil {
		out, _ := os.ReadFile(p.dir + "/ctl.log")
		return fmt.Errorf("pg_ctl %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 2000))
	}
	return nil
}

func (p *pgServer) asPostgres(args ...string) error {
	cmd := exec.Command("su", "postgres", "-s", "/bin/sh", "-c", shellQuote(args))
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", args[0], err, out)
	}
	return nil
}

// exec runs statements on a database of the cluster, directly.
func (p *pgServer) exec(ctx context.Context, db string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, p.url("", db))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// chServer is a ClickHouse server of the suite's own; kill and start
// simulate an outage. With chdb set it is ClickHouse 26.7 from libchdb,
// hosted as the local stack hosts it (deploy/chdb): the launcher behind the
// shield, both in one process group, so a kill takes down both as a crash
// of clickhouse-server would.
type chServer struct {
	dir       string
	tcp, http int
	inner     int // chdb: the server's own native port, behind the shield
	chdb      *chdbHost
	cmd       *exec.Cmd
	exited    chan struct{}
}

// chdbHost names the local stack's libchdb, launcher and shield.
type chdbHost struct{ lib, launcher, shield string }

// chdbFromEnv is the libchdb host that the modern leg of make test asks
// for (FERRY_CHAOS_CH=chdb), or nil for Debian's clickhouse-server.
func chdbFromEnv() (*chdbHost, error) {
	if os.Getenv("FERRY_CHAOS_CH") != "chdb" {
		return nil, nil
	}
	h := &chdbHost{os.Getenv("FERRY_CHDB_LIB"), os.Getenv("FERRY_CHDB_LAUNCHER"), os.Getenv("FERRY_CHDB_SHIELD")}
	for _, f := range []string{h.lib, h.launcher, h.shield} {
		if _, err := os.Stat(f); f == "" || err != nil {
			return nil, fmt.Errorf("FERRY_CHAOS_CH=chdb needs FERRY_CHDB_LIB, FERRY_CHDB_LAUNCHER and FERRY_CHDB_SHIELD (from .stack/env): %q missing", f)
		}
	}
	return h, nil
}

func startCH(host *chdbHost) (*chServer, error) {
	dir, err := os.MkdirTemp("", "ferry-chaos-ch-")
	if err != nil {
		return nil, err
	}
	c := &chServer{dir: dir, chdb: host}
	if c.tcp, err = freePort(); err != nil {
		return nil, err
	}
	if c.http, err = freePort(); err != nil {
		return nil, err
	}
	if c.inner, err = freePort(); err != nil {
		return nil, err
	}
	if err := c.writeConfig(); err != nil {
		return nil, err
	}
	pidFile := shellQuote([]string{filepath.Join(dir, "pid")})
	// The server leads its own process group (with the shield, for chdb).
	watchdog("[ -s " + pidFile + " ] && kill -KILL -- \"-$(cat " + pidFile + ")\"; rm -rf " + shellQuote([]string{dir}))
	return c, c.start()
}

func (c *chServer) writeConfig() error {
	for _, d := range []string{"data", "tmp", "user_files", "log"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return err
		}
	}
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>%[1]s/log/server.log</log><errorlog>%[1]s/log/error.log</errorlog></logger>
    <tcp_port>%[2]d</tcp_port>
    <http_port>%[3]d</http_port>
    <listen_host>127.0.0.1</listen_host>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <user_files_path>%[1]s/user_files/</user_files_path>
    <users_config>%[1]s/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mlock_executable>false</mlock_executable>
    <mark_cache_size>67108864</mark_cache_size>
    <uncompressed_cache_size>0</uncompressed_cache_size>
    <max_table_size_to_drop>0</max_table_size_to_drop>
</yandex>
`, c.dir, c.tcp, c.http)
	users := `<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
    <quotas><default></default></quotas>
</yandex>
`
	if c.chdb != nil {
		// clickhouse-local takes its ports from the command line and wants
		// <clickhouse> as the root element.
		config = fmt.Sprintf(`<clickhouse>
    <logger><level>warning</level><log>%[1]s/log/server.log</log><errorlog>%[1]s/log/error.log</errorlog></logger>
    <users_config>%[1]s/users.xml</users_config>
    <timezone>UTC</timezone>
    <max_table_size_to_drop>0</max_table_size_to_drop>
</clickhouse>
`, c.dir)
		users = strings.ReplaceAll(strings.ReplaceAll(users, "<yandex>", "<clickhouse>"), "</yandex>", "</clickhouse>")
	}
	if err := os.WriteFile(filepath.Join(c.dir, "config.xml"), []byte(config), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dir, "users.xml"), []byte(users), 0o644)
}

// command is the server's process: clickhouse-server, or the shield and
// the libchdb launcher under one shell.
func (c *chServer) command() *exec.Cmd {
	if c.chdb == nil {
		return exec.Command("clickhouse-server", "--config-file="+filepath.Join(c.dir, "config.xml"))
	}
	query := "SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; SELECT sleepEachRow(1) FROM system.numbers SETTINGS max_block_size = 1 FORMAT Null"
	shield := shellQuote([]string{c.chdb.shield, "-listen", fmt.Sprintf("127.0.0.1:%d", c.tcp), "-upstream", fmt.Sprintf("127.0.0.1:%d", c.inner), "-user", "default="})
	server := shellQuote([]string{c.chdb.launcher, c.chdb.lib, "--config-file=" + filepath.Join(c.dir, "config.xml"),
		"--path=" + filepath.Join(c.dir, "data") + "/", "--listen_host=127.0.0.1",
		fmt.Sprintf("--tcp_port=%d", c.inner), fmt.Sprintf("--http_port=%d", c.http), "--query", query})
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
	deadline := time.Now().Add(90 * time.Second)
	for {
		if err := c.ping(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("clickhouse-server did not answer on port %d: %w", c.tcp, err)
		}
		select {
		case <-c.exited:
			out, _ := os.ReadFile(filepath.Join(c.dir, "log", "error.log"))
			return fmt.Errorf("clickhouse-server exited at start:\n%s", tail(string(out), 2000))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// version is the server's version, or the error that asking it gave.
func (c *chServer) version() string {
	conn, err := c.open("")
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	v, err := conn.ServerVersion()
	if err != nil {
		return err.Error()
	}
	return v.String()
}

func (c *chServer) ping() error {
	conn, err := c.open("")
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return conn.Ping(ctx)
}

// open connects to the server, or through a proxy at addr.
func (c *chServer) open(addr string) (ch.Conn, error) {
	if addr == "" {
		addr = fmt.Sprintf("127.0.0.1:%d", c.tcp)
	}
	return ch.Open(&ch.Options{Addr: []string{addr}, DialTimeout: 2 * time.Second})
}

// url is ferry's --ch URL, directly or through a proxy at addr.
func (c *chServer) url(addr string) string {
	if addr == "" {
		addr = fmt.Sprintf("127.0.0.1:%d", c.tcp)
	}
	return "clickhouse://default@" + addr + "/default"
}

// kill ends the server with SIGKILL, as a crash would.
func (c *chServer) kill() {
	if c.cmd == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.exited
	c.cmd = nil
	_ = os.Remove(filepath.Join(c.dir, "pid"))
}

// running reports whether the server process is alive.
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

// ensureUp starts the server if a failed scenario left it down.
func (c *chServer) ensureUp() error {
	if c.running() {
		return nil
	}
	return c.start()
}

func (c *chServer) stop() {
	c.kill()
	os.RemoveAll(c.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// connect opens a direct connection to a database of the cluster.
func (p *pgServer) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, p.url("", db))
}
