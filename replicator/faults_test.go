package replicator_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// privatePG is a PostgreSQL cluster of the test's own, so that it can be
// restarted without disturbing the shared stack.
type privatePG struct {
	t    *testing.T
	bin  string
	dir  string
	port int
	URL  string
}

// startPrivatePG initdbs and starts a cluster on a free loopback port, as
// the postgres user (PostgreSQL refuses to run as root).
func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	bin := "/usr/lib/postgresql/15/bin"
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		bin = string(out[:len(out)-1])
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		t.Skip("no initdb: PostgreSQL's server binaries are needed for this test")
	}
	pgUser, err := user.Lookup("postgres")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("this test starts a cluster as the postgres user, which needs root and that user")
	}
	dir, err := os.MkdirTemp("/var/tmp", "ferry-pg-")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	p := &privatePG{t: t, bin: bin, dir: dir, port: freePort(t)}
	p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	t.Cleanup(func() {
		_ = p.ctl("stop", "-m", "immediate")
		os.RemoveAll(dir)
	})
	p.asPostgres(filepath.Join(bin, "initdb"), "-D", dir+"/data", "-A", "trust", "-U", "postgres")
	if err := p.ctl("start", "-w", "-l", dir+"/log", "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c wal_level=logical -c max_replication_slots=8 -c max_wal_senders=8", p.port, dir)); err != nil {
		t.Fatal(err)
	}
	return p
}

// restart stops the cluster with the given shutdown mode and starts it.
func (p *privatePG) restart(mode string) {
	p.t.Helper()
	if err := p.ctl("restart", "-w", "-m", mode); err != nil {
		p.t.Fatal(err)
	}
}

// ctl runs pg_ctl. Its output goes to a file: the server it starts
// inherits pg_ctl's output, so a pipe would never be closed.
func (p *privatePG) ctl(args ...string) error {
	args = append([]string{filepath.Join(p.bin, "pg_ctl"), "-D", p.dir + "/data"}, args...)
	cmd := exec.Command("su", "postgres", "-s", "/bin/sh", "-c", shellJoin(args)+" >>"+p.dir+"/ctl.log 2>&1")
	cmd.Dir = "/"
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(p.dir + "/ctl.log")
		return fmt.Errorf("pg_ctl %v: %v\n%s", args[3:], err, out)
	}
	return nil
}

func (p *privatePG) asPostgres(args ...string) {
	p.t.Helper()
	cmd := exec.Command("su", "postgres", "-s", "/bin/sh", "-c", shellJoin(args))
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

func shellJoin(args []string) string {
	s := ""
	for _, a := range args {
		s += "'" + a + "' "
	}
	return s
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPostgresRestart restarts PostgreSQL twice (fast, then immediate
// shutdown) while ferry streams and a writer writes: ferry reconnects,
// resumes from its confirmed position, and loses or doubles nothing.
func TestPostgresRestart(t *testing.T) {
	pg := startPrivatePG(t)
	e := newEnvAt(t, pg.URL)
	e.exec(`CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL)`,
		`INSERT INTO items SELECT g, 0 FROM generate_series(1, 1000) g`)
	cfg := e.config()
	cfg.StandbyInterval = 500 * time.Millisecond
	e.mustCatchUp(cfg)
	stop := e.streamInBackground(cfg)
	written := make(chan int, 1)
	done := make(chan struct{})
	go func() { written <- writeThroughRestarts(e, done) }()
	time.Sleep(500 * time.Millisecond)
	pg.restart("fast")
	time.Sleep(time.Second)
	e.reconnect()
	pg.restart("immediate")
	time.Sleep(2 * time.Second)
	close(done)
	n := <-written
	e.reconnect()
	stop()
	if n == 0 {
		t.Fatal("the writer wrote nothing")
	}
	counts := e.verifyAll(cfg)
	if counts["public.items"] < 1000 {
		t.Errorf("items: %d rows", counts["public.items"])
	}
}

// writeThroughRestarts inserts and updates rows until done, reconnecting
// when the server goes away; it returns how many transactions committed.
func writeThroughRestarts(e *env, done chan struct{}) int {
	ctx := context.Background()
	var conn *pgx.Conn
	n := 0
	for i := int64(1); ; i++ {
		select {
		case <-done:
			if conn != nil {
				conn.Close(ctx)
			}
			return n
		default:
		}
		if conn == nil {
			c, err := pgx.Connect(ctx, e.pgURL)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			conn = c
		}
		_, err := conn.Exec(ctx, `INSERT INTO items VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET v = items.v + 1`, 2000+i%300)
		if err != nil {
			conn.Close(ctx)
			conn = nil
			continue
		}
		n++
	}
}

// reconnect replaces the env's PostgreSQL connection after a restart.
func (e *env) reconnect() {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		conn, err := pgx.Connect(context.Background(), e.pgURL)
		if err == nil {
			e.pg.Close(context.Background())
			e.pg = conn
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("reconnect: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
