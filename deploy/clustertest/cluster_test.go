package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// seedRows is how many rows the table holds before ferry's initial copy.
const seedRows = 3000

// skipUnlessReady skips the test, saying why, when what it needs is missing.
func skipUnlessReady(t *testing.T) {
	t.Helper()
	if os.Getenv("FERRY_PG_URL") == "" {
		t.Skip("FERRY_PG_URL is not set: run make stack-up and . .stack/env")
	}
	// The cluster is the test's own 18.16 servers, whatever FERRY_CH_URL
	// says: once per `make test` is enough.
	if os.Getenv("FERRY_CH_LEG") == "modern" {
		t.Skip("the cluster test runs its own ClickHouse 18.16 servers: it runs on the legacy leg")
	}
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		t.Skip("no clickhouse-server in PATH (deploy/stack.sh up installs it)")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("no java in PATH: ZooKeeper needs it (apt-get install zookeeper)")
	}
	if _, err := os.Stat(zkClasspath); err != nil {
		t.Skip("no " + zkClasspath + " (apt-get install zookeeper; CLUSTER=1 deploy/stack.sh up does)")
	}
}

// TestClusterLive runs ferry against a cluster of two shards of two
// replicas each while a writer changes the source: a replica killed and
// restarted, then the server ferry talks to, then both replicas of a
// shard, then the server ferry talks to lost for good and ferry started
// on another one. After each
// part the Distributed table must read as PostgreSQL does, and every
// replica must hold exactly its shard's rows.
func TestClusterLive(t *testing.T) {
	skipUnlessReady(t)
	began := time.Now()
	ctx := context.Background()
	bin := testkit.BuildFerry(t)
	c, err := startCluster(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	t.Logf("ZooKeeper and 4 servers up after %s", time.Since(began).Round(time.Millisecond))
	src := newSource(t, ctx, seedRows)
	out := &testkit.Buffer{}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("CLUSTER_LOG") != "" {
			t.Logf("ferry's output:\n%s", tail(out.String(), 30000))
			for _, n := range c.nodes {
				t.Logf("%s: %s", n.name(), n.status())
			}
		}
	})
	args := func(n *chNode, extra ...string) []string {
		return append([]string{"run", "--pg", src.url, "--ch", n.url(), "--ch-cluster", clusterName,
			"--ch-database", src.name, "--slot", src.name, "--publication", src.name,
			"--metrics-addr=", "--heartbeat=0", "--batch-age=100ms"}, extra...)
	}
	entry, other := c.node(1, 1), c.node(2, 1)
	f := startFerry(t, bin, out, args(entry)...)
	w := startWriter(ctx, src, seedRows+1)
	waitRows(t, other, src.name, seedRows/2, "the initial copy")
	f.mustRun(t)

	// A replica that ferry does not talk to: the Distributed insert goes
	// to the shard's other replica, and the killed one fetches what it
	// missed when it is back.
	outage(t, c, w, c.node(2, 2))
	f.mustRun(t)
	// The server ferry talks to: its inserts fail until it is back, and
	// ferry retries them.
	outage(t, c, w, entry)
	f.mustRun(t)
	// A whole shard: the Distributed insert fails (no replica of shard 2
	// answers) until one is back.
	outage(t, c, w, c.node(2, 1), c.node(2, 2))
	f.mustRun(t)
	t.Logf("writer: %s", w.halt(t))
	want := src.rows(t, ctx)
	waitMatch(t, other, src.name, want, 120*time.Second)
	checkReplicas(t, c, src.name, want)
	f.mustRun(t)

	// The server --ch names is lost: ferry's state must be on the others.
	f.stop(t)
	entry.kill()
	w = startWriter(ctx, src, w.next)
	time.Sleep(2 * time.Second)
	t.Logf("writer, with %s down: %s", entry.name(), w.halt(t))
	mark := len(out.String())
	g := startFerry(t, bin, out, args(other, "--catch-up")...)
	if err := g.wait(t, 180*time.Second); err != nil {
		t.Fatalf("ferry --catch-up on %s with %s down: %v", other.name(), entry.name(), err)
	}
	// "resuming" is what ferry logs when the state says the initial copy
	// is done; without that state it copies every table again.
	if log := out.String()[mark:]; !strings.Contains(log, "resuming") || strings.Contains(log, "copied table") {
		t.Errorf("ferry on %s did not resume from the state it kept on %s:\n%s", other.name(), entry.name(), tail(log, 4000))
	}
	want = src.rows(t, ctx)
	waitMatch(t, other, src.name, want, 30*time.Second)
	if err := entry.start(); err != nil {
		t.Fatal(err)
	}
	if err := entry.waitReady(); err != nil {
		t.Fatal(err)
	}
	checkReplicas(t, c, src.name, want)
	t.Logf("the test took %s", time.Since(began).Round(time.Millisecond))
}

// outage kills nodes with SIGKILL while the writer runs, and starts them
// again a few seconds later. It waits first for every server to have run
// the distributed DDL ferry queued: 18.16 creates a replicated table in
// steps (ZooKeeper first, then the metadata file), and a server killed
// between them never gets the table (the statement, run again from the
// queue, finds its replica in ZooKeeper and fails). That is 18.16's, not
// what the test is about.
func outage(t *testing.T, c *cluster, w *writer, nodes ...*chNode) {
	t.Helper()
	waitDDL(t, c)
	before := w.count()
	var names []string
	for _, n := range nodes {
		n.kill()
		names = append(names, n.name())
	}
	time.Sleep(3 * time.Second)
	for _, n := range nodes {
		if err := n.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if err := n.waitReady(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	t.Logf("%s killed and restarted: %d transactions written meanwhile", strings.Join(names, " and "), w.count()-before)
}

// waitDDL waits until every server has finished every task of the
// distributed DDL queue.
func waitDDL(t *testing.T, c *cluster) {
	t.Helper()
	const queue = "/clickhouse/task_queue/ddl"
	var pending []string
	deadline := time.Now().Add(180 * time.Second)
	for !ddlDone(c, queue, &pending) {
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes, the distributed DDL queue still has tasks not every server has run: %v", pending)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ddlDone reports whether every server has finished every task of the
// queue, and sets pending to those some have not.
func ddlDone(c *cluster, queue string, pending *[]string) bool {
	conn, err := c.node(1, 1).open()
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT name FROM system.zookeeper WHERE path = '"+queue+"'")
	if err != nil {
		return false
	}
	var tasks []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return false
		}
		tasks = append(tasks, name)
	}
	rows.Close()
	if rows.Err() != nil {
		return false
	}
	*pending = (*pending)[:0]
	for _, task := range tasks {
		var done uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '"+queue+"/"+task+"/finished'").Scan(&done); err != nil {
			return false
		}
		if done < uint64(len(c.nodes)) {
			*pending = append(*pending, fmt.Sprintf("%s (%d of %d)", task, done, len(c.nodes)))
		}
	}
	return len(tasks) > 0 && len(*pending) == 0
}

// waitRows waits until the Distributed table, read through n, holds at
// least min live rows.
func waitRows(t *testing.T, n *chNode, db string, min int, what string) {
	t.Helper()
	testkit.WaitFor(t, 120*time.Second, what, func() bool {
		got, err := readRows(n, db, "items")
		return err == nil && len(got) >= min
	})
}

// waitMatch waits until the Distributed table, read through n, equals
// want, and fails with the difference when it does not in time.
func waitMatch(t *testing.T, n *chNode, db string, want map[string]string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got, err := readRows(n, db, "items")
		if err == nil {
			missing, extra, differ, sample := diff(want, got)
			if missing+extra+differ == 0 {
				t.Logf("Distributed table through %s equals PostgreSQL: %d rows", n.name(), len(want))
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Distributed table through %s after %s: %d rows missing, %d extra, %d differ of %d (%s)",
					n.name(), d, missing, extra, differ, len(want), sample)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("read the Distributed table through %s: %v", n.name(), err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// checkReplicas checks that both replicas of each shard hold the same
// rows, once each has fetched what its queue holds, and that the shards
// together hold want, each row on one shard only.
func checkReplicas(t *testing.T, c *cluster, db string, want map[string]string) {
	t.Helper()
	union := map[string]string{}
	overlap := 0
	for s := 1; s <= 2; s++ {
		var first map[string]string
		for r := 1; r <= 2; r++ {
			n := c.node(s, r)
			if err := syncReplica(n, db); err != nil {
				t.Fatalf("SYSTEM SYNC REPLICA on %s: %v", n.name(), err)
			}
			got, err := readRows(n, db, "items_local")
			if err != nil {
				t.Fatalf("read %s's local table: %v", n.name(), err)
			}
			if r == 1 {
				first = got
				continue
			}
			if missing, extra, differ, sample := diff(first, got); missing+extra+differ != 0 {
				t.Errorf("shard %d: %s holds %d rows, %s %d: %d missing, %d extra, %d differ (%s)",
					s, c.node(s, 1).name(), len(first), n.name(), len(got), missing, extra, differ, sample)
			}
		}
		if len(first) == 0 {
			t.Errorf("shard %d holds no rows", s)
		}
		for k, v := range first {
			if _, ok := union[k]; ok {
				overlap++
			}
			union[k] = v
		}
		t.Logf("shard %d: both replicas hold the same %d rows", s, len(first))
	}
	missing, extra, differ, sample := diff(want, union)
	if missing+extra+differ+overlap != 0 {
		t.Errorf("the shards against PostgreSQL: %d rows missing, %d extra, %d differ, %d on both shards (%s)",
			missing, extra, differ, overlap, sample)
	}
}

// readRows reads a table's live rows through n: id → "v|n".
func readRows(n *chNode, db, table string) (map[string]string, error) {
	conn, err := n.open()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT toString(id), v, toString(n) FROM `%s`.`%s` FINAL WHERE _ferry_deleted = 0", db, table))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, v, num string
		if err := rows.Scan(&id, &v, &num); err != nil {
			return nil, err
		}
		out[id] = v + "|" + num
	}
	return out, rows.Err()
}

func syncReplica(n *chNode, db string) error {
	conn, err := n.open()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// A replica restarted a moment ago may not show the table yet: a
	// CREATE ... ON CLUSTER it missed while down comes from the
	// distributed DDL queue, and 18.16 may take the replica's ZooKeeper
	// node of before the kill for a live one for a while. The wait is for
	// a hang, not for speed.
	for {
		err := conn.Exec(ctx, fmt.Sprintf("SYSTEM SYNC REPLICA `%s`.`items_local`", db))
		var ex *ch.Exception
		if err == nil || !errors.As(err, &ex) || ex.Code != 60 || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}
