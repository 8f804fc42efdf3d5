package torture

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// Servers are the shared stack a round runs against.
type Servers struct {
	PG     string // superuser URL (FERRY_PG_URL)
	CH     string // ClickHouse native URL
	Ferry  string // the ferry binary
	Legacy bool   // the ClickHouse server is older than 22.8
	// Private are servers of torture's own, for the plans that restart
	// servers (HasRestarts); nil: such plans fail to start.
	Private *Private
}

// env is one round's private PostgreSQL role and database (same name),
// replication slot, and ClickHouse database, dropped by close.
type env struct {
	srv      Servers
	name     string
	roleURL  string // the database as the role (REPLICATION, not superuser)
	adminURL string // the database as the superuser
	pg       *pgx.Conn
	ch       driver.Conn
	kafka    *kfake.Cluster // a Kafka round's broker
}

func newEnv(ctx context.Context, srv Servers) (*env, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	e := &env{srv: srv, name: "ferry_tt_" + hex.EncodeToString(b)}
	admin, err := pgx.Connect(ctx, srv.PG)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer admin.Close(ctx)
	// 64kB makes every transaction of a few rows with a TOAST body stream.
	for _, q := range []string{
		"CREATE ROLE " + e.name + " LOGIN REPLICATION",
		"ALTER ROLE " + e.name + " SET logical_decoding_work_mem = '64kB'",
		"CREATE DATABASE " + e.name + " OWNER " + e.name,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	u, err := url.Parse(srv.PG)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + e.name
	e.adminURL = u.String()
	u.User = url.User(e.name)
	e.roleURL = u.String()
	if e.pg, err = pgx.Connect(ctx, e.roleURL); err != nil {
		e.close()
		return nil, err
	}
	opts, err := ch.ParseDSN(srv.CH)
	if err != nil {
		e.close()
		return nil, err
	}
	opts.ReadTimeout = 5 * time.Minute
	if e.ch, err = ch.Open(opts); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// close drops everything the round created.
func (e *env) close() {
	ctx := context.Background()
	if e.pg != nil {
		e.pg.Close(ctx)
	}
	if admin, err := pgx.Connect(ctx, e.srv.PG); err == nil {
		// The slot may be held for a moment by a walsender going away.
		for i := 0; i < 100; i++ {
			_, err = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, e.name)
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+e.name+" WITH (FORCE)")
		_, _ = admin.Exec(ctx, "DROP ROLE IF EXISTS "+e.name)
		admin.Close(ctx)
	}
	if e.ch != nil {
		_ = e.ch.Exec(ctx, "DROP DATABASE IF EXISTS `"+e.name+"`")
		e.ch.Close()
	}
	if e.kafka != nil {
		e.kafka.Close()
	}
}

// viaProxy is url u with its host:port replaced by addr.
func viaProxy(raw, addr string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = addr
	return u.String()
}

func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// ferryEnv is the environment without FERRY_* variables, so that only
// the flags configure the subprocess.
func ferryEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FERRY_") {
			out = append(out, kv)
		}
	}
	return out
}

// proc is a running ferry: `ferry run`, or a Kafka round's `ferry load`.
type proc struct {
	cmd    *exec.Cmd
	out    *testkit.Buffer
	exited chan struct{}
	err    error
}

func startFerry(bin string, args []string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = ferryEnv()
	p := &proc{cmd: cmd, out: &testkit.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	// A test binary that dies must not leave ferry running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// term sends SIGTERM and waits; ferry flushes, confirms and exits 0.
func (p *proc) term(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("no exit within %s of SIGTERM", timeout)
	}
}

// runFerry runs a ferry command to its end.
func runFerry(ctx context.Context, bin string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = ferryEnv()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("ferry %s: no exit within %s", args[0], timeout)
	}
	return string(out), err
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
