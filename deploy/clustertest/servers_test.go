package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// clusterName is the remote_servers name the servers share.
const clusterName = "ferry_cluster"

// zkServer is a standalone ZooKeeper of the test's own.
type zkServer struct {
	dir  string
	port int
	cmd  *exec.Cmd
}

// zkClasspath is Debian's zookeeper.jar: its manifest names the jars it
// needs, so it is the whole class path.
const zkClasspath = "/usr/share/java/zookeeper.jar"

func startZK(dir string, port int) (*zkServer, error) {
	z := &zkServer{dir: dir, port: port}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	// The tick bounds the sessions ClickHouse may ask for (2 to 20 ticks):
	// 10 s, short enough that a killed server's ephemeral nodes go soon,
	// long enough for a loaded machine (18.16 crashed in its DDL worker
	// once when a 4 s session expired while it started).
	cfg := fmt.Sprintf("tickTime=1000\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n", dir, port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	z.cmd = exec.Command("java", "-Xmx192m", "-XX:+UseSerialGC", "-cp", zkClasspath,
		"org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg"))
	z.cmd.Stdout, z.cmd.Stderr = logf, logf
	z.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := z.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(90 * time.Second)
	for !zkOK(port) {
		if time.Now().After(deadline) {
			z.stop()
			out, _ := os.ReadFile(filepath.Join(dir, "zookeeper.log"))
			return nil, fmt.Errorf("zookeeper did not answer on port %d:\n%s", port, tail(string(out), 2000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return z, nil
}

// zkOK asks ZooKeeper "srvr", which it answers with its mode once it
// serves sessions. ("ruok" is answered earlier; a clickhouse-server 18.16
// that connected then crashed in its DDL worker when first used.)
func zkOK(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return strings.Contains(string(b), "Mode: standalone")
}

func (z *zkServer) stop() {
	if z.cmd != nil && z.cmd.Process != nil {
		_ = syscall.Kill(-z.cmd.Process.Pid, syscall.SIGKILL)
		_ = z.cmd.Wait()
	}
}

// chNode is one clickhouse-server of the cluster: shard and replica are
// 1-based.
type chNode struct {
	dir                   string
	shard, replica        int
	tcp, http, interOther int
	cmd                   *exec.Cmd
	exited                chan struct{}
}

func (n *chNode) name() string { return fmt.Sprintf("s%dr%d", n.shard, n.replica) }

func (n *chNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.tcp) }

// url is ferry's --ch URL of the node.
func (n *chNode) url() string { return "clickhouse://default@" + n.addr() + "/default" }

// writeConfig writes the node's config.xml: its ports and directories, the
// cluster of all nodes (internal_replication: a Distributed insert goes to
// one replica of a shard, which replicates it), its macros and ZooKeeper.
func (n *chNode) writeConfig(nodes []*chNode, zkPort int) error {
	for _, d := range []string{"data", "tmp", "user_files", "log"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	var shards strings.Builder
	for s := 1; s <= 2; s++ {
		shards.WriteString("<shard><internal_replication>true</internal_replication>")
		for _, o := range nodes {
			if o.shard == s {
				fmt.Fprintf(&shards, "<replica><host>127.0.0.1</host><port>%d</port></replica>", o.tcp)
			}
		}
		shards.WriteString("</shard>")
	}
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>%[1]s/log/server.log</log><errorlog>%[1]s/log/error.log</errorlog></logger>
    <tcp_port>%[2]d</tcp_port>
    <http_port>%[3]d</http_port>
    <interserver_http_port>%[4]d</interserver_http_port>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <listen_host>127.0.0.1</listen_host>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <user_files_path>%[1]s/user_files/</user_files_path>
    <users_config>%[1]s/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mlock_executable>false</mlock_executable>
    <mark_cache_size>33554432</mark_cache_size>
    <uncompressed_cache_size>0</uncompressed_cache_size>
    <max_table_size_to_drop>0</max_table_size_to_drop>
    <remote_servers><%[5]s>%[6]s</%[5]s></remote_servers>
    <zookeeper><node><host>127.0.0.1</host><port>%[7]d</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>
    <macros><shard>%02[8]d</shard><replica>%[9]s</replica></macros>
    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
</yandex>
`, n.dir, n.tcp, n.http, n.interOther, clusterName, shards.String(), zkPort, n.shard, n.name())
	users := `<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>1000000000</max_memory_usage><background_pool_size>4</background_pool_size><distributed_ddl_task_timeout>120</distributed_ddl_task_timeout></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
    <quotas><default></default></quotas>
</yandex>
`
	if err := os.WriteFile(filepath.Join(n.dir, "config.xml"), []byte(config), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.dir, "users.xml"), []byte(users), 0o644)
}

// start runs the server; wait for it with waitUp.
func (n *chNode) start() error {
	logf, err := os.OpenFile(filepath.Join(n.dir, "log", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("clickhouse-server", "--config-file="+filepath.Join(n.dir, "config.xml"))
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(n.exited)
	return nil
}

// waitUp waits until the server answers a query.
//
// A server killed right after an insert may hold a part that ZooKeeper
// never heard of (the insert was not acknowledged, and ferry sends it
// again). In a table of a part or two, such as ferry's state tables, that
// is more than the half of the rows 18.16 accepts as unexpected, and the
// server refuses to start ("doesn't look like the set of parts in
// ZooKeeper"; 18.16 then hangs on its way out instead of exiting). The
// operator's step for it, as ClickHouse's docs give it after a failure, is
// the flags/force_restore_data file; the test takes that step, once per
// start, and says so.
func (n *chNode) waitUp() error {
	deadline := time.Now().Add(120 * time.Second)
	mark := n.errorLogSize()
	for {
		err := n.ping()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clickhouse-server %s did not answer on port %d: %w (%s)", n.name(), n.tcp, err, n.lastError(mark))
		}
		if last := n.lastError(mark); strings.Contains(last, "doesn't look like the set of parts in ZooKeeper") {
			fmt.Fprintf(os.Stderr, "clustertest: %s refused to start: %s; starting it again with flags/force_restore_data\n", n.name(), tail(last, 400))
			n.kill()
			if err := os.MkdirAll(filepath.Join(n.dir, "data", "flags"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(n.dir, "data", "flags", "force_restore_data"), nil, 0o644); err != nil {
				return err
			}
			mark = n.errorLogSize()
			if err := n.start(); err != nil {
				return err
			}
			continue
		}
		select {
		case <-n.exited:
			out, _ := os.ReadFile(filepath.Join(n.dir, "log", "error.log"))
			// Try again until the deadline when the cause passes: ports
			// 40000-49999 are in Linux's ephemeral range, so another
			// process's outgoing connection may hold one of ours for a
			// while; and 18.16 refuses to load a replicated table while the
			// killed process's ZooKeeper session still marks its replica
			// active (its tables fail to load and the server exits; seen
			// in CI after a SIGKILL and a restart 3 s later).
			if transientStartFailure(string(out)) && time.Now().Before(deadline) {
				time.Sleep(time.Second)
				mark = n.errorLogSize()
				if err := n.start(); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("clickhouse-server %s exited at start:\n%s", n.name(), tail(string(out), 2000))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *chNode) errorLogSize() int64 {
	fi, err := os.Stat(filepath.Join(n.dir, "log", "error.log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// lastError is the first line of the last <Error> the server logged since
// the error log was mark bytes long: the message, without the stack.
func (n *chNode) lastError(mark int64) string {
	out, _ := os.ReadFile(filepath.Join(n.dir, "log", "error.log"))
	if int64(len(out)) < mark {
		mark = 0
	}
	last := ""
	for _, line := range strings.Split(string(out[mark:]), "\n") {
		if strings.Contains(line, "<Error>") {
			last = line
		}
	}
	if last == "" {
		return "no error logged"
	}
	return last
}

// waitReady waits until the server answers and reaches ZooKeeper.
func (n *chNode) waitReady() error {
	if err := n.waitUp(); err != nil {
		return err
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		err := n.queryZK()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clickhouse-server %s does not reach ZooKeeper: %w", n.name(), err)
		}
		select {
		case <-n.exited:
			return fmt.Errorf("clickhouse-server %s exited: %s", n.name(), n.status())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *chNode) queryZK() error {
	conn, err := n.open()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var c uint64
	return conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '/'").Scan(&c)
}

func (n *chNode) ping() error {
	conn, err := n.open()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return conn.Ping(ctx)
}

func (n *chNode) open() (ch.Conn, error) {
	return ch.Open(&ch.Options{Addr: []string{n.addr()}, DialTimeout: 3 * time.Second})
}

// status says whether the server runs, and the end of its error log.
func (n *chNode) status() string {
	state := "running"
	if n.cmd == nil {
		state = "killed by the test"
	} else {
		select {
		case <-n.exited:
			state = "exited on its own"
		default:
		}
	}
	out, _ := os.ReadFile(filepath.Join(n.dir, "log", "error.log"))
	return fmt.Sprintf("%s, port %d; last error: %s; error log: %s", state, n.tcp, tail(n.lastError(0), 1000), tail(string(out), 1500))
}

// kill ends the server with SIGKILL, as a crash would.
func (n *chNode) kill() {
	if n.cmd == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
	n.cmd = nil
}

// cluster is the ZooKeeper and the four servers: shards 1 and 2, each of
// replicas 1 and 2.
type cluster struct {
	zk    *zkServer
	nodes []*chNode
}

// startCluster picks free ports and starts everything under dir.
func startCluster(dir string) (*cluster, error) {
	ports, err := freePorts(1 + 4*3)
	if err != nil {
		return nil, err
	}
	c := &cluster{}
	if c.zk, err = startZK(filepath.Join(dir, "zk"), ports[0]); err != nil {
		return nil, err
	}
	for i := 0; i < 4; i++ {
		n := &chNode{shard: i/2 + 1, replica: i%2 + 1, tcp: ports[1+3*i], http: ports[2+3*i], interOther: ports[3+3*i]}
		n.dir = filepath.Join(dir, n.name())
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := n.writeConfig(c.nodes, c.zk.port); err != nil {
			c.stop()
			return nil, err
		}
		if err := n.start(); err != nil {
			c.stop()
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := n.waitReady(); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.warmUp(); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// warmUp runs one distributed DDL statement, the first use of every
// server's DDL worker, and restarts (once) a server that does not live
// through it: on a loaded machine 18.16 was seen to crash there
// (a segfault in zkutil::ZooKeeper::createImpl), which is 18.16's bug and
// not what the test is about.
func (c *cluster) warmUp() error {
	for attempt := 1; ; attempt++ {
		err := c.nodes[0].execCtx(150*time.Second, "CREATE DATABASE IF NOT EXISTS warmup ON CLUSTER "+clusterName)
		var dead []*chNode
		for _, n := range c.nodes {
			select {
			case <-n.exited:
				dead = append(dead, n)
			default:
			}
		}
		if err == nil && len(dead) == 0 {
			return nil
		}
		if attempt == 2 {
			return fmt.Errorf("the cluster's first distributed DDL: %v (%d servers died)", err, len(dead))
		}
		for _, n := range dead {
			fmt.Fprintf(os.Stderr, "clustertest: %s died at its first distributed DDL (%s); starting it again\n", n.name(), tail(n.status(), 300))
			n.cmd = nil
			if err := n.start(); err != nil {
				return err
			}
			if err := n.waitReady(); err != nil {
				return err
			}
		}
	}
}

// execCtx runs one statement on the node with a deadline.
func (n *chNode) execCtx(d time.Duration, q string) error {
	conn, err := n.open()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return conn.Exec(ctx, q)
}

func (c *cluster) node(shard, replica int) *chNode { return c.nodes[(shard-1)*2+replica-1] }

func (c *cluster) stop() {
	for _, n := range c.nodes {
		n.kill()
	}
	if c.zk != nil {
		c.zk.stop()
	}
}

// freePorts picks n distinct ports in 40000-49999 that nothing listens on.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("no free ports in 40000-49999")
		}
		p := 40000 + rand.IntN(10000)
		if seen[p] {
			continue
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		out = append(out, p)
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// transientStartFailure reports an exit at start that a later start can
// get past.
func transientStartFailure(errorLog string) bool {
	last := tail(errorLog, 4000)
	for _, cause := range []string{"Address already in use", "already active", "REPLICA_IS_ALREADY_ACTIVE", "StorageReplicatedMergeTree", "ZooKeeper"} {
		if strings.Contains(last, cause) {
			return true
		}
	}
	return false
}
