package chaostest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// suite is what every scenario shares: the ferry binary, the servers and
// the proxies in front of them. Scenarios run one after another, each in
// databases of its own.
type suite struct {
	dir     string
	bin     string
	pg      *pgServer
	ch      *chServer
	pgProxy *testkit.Proxy
	chProxy *testkit.Proxy
}

var (
	setupOnce sync.Once
	shared    *suite
	skipWhy   string
	setupErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.close()
	}
	if err := writeReport(os.Getenv("CHAOS_REPORT")); err != nil {
		fmt.Fprintln(os.Stderr, "chaos report:", err)
		code = 1
	}
	os.Exit(code)
}

// getSuite sets the suite up on first use, or skips the test saying why.
func getSuite(t *testing.T) *suite {
	t.Helper()
	setupOnce.Do(func() { shared, skipWhy, setupErr = setup() })
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	if err := shared.pg.ensureUp(); err != nil {
		t.Fatal(err)
	}
	if err := shared.ch.ensureUp(); err != nil {
		t.Fatal(err)
	}
	shared.pgProxy.Reset()
	shared.chProxy.Reset()
	return shared
}

func setup() (*suite, string, error) {
	if os.Geteuid() != 0 {
		return nil, "the chaos suite runs PostgreSQL as the postgres user, which needs root", nil
	}
	pgBin, err := pgBinDir()
	if err != nil {
		return nil, "chaos suite: " + err.Error(), nil
	}
	if _, err := user.Lookup("postgres"); err != nil {
		return nil, "chaos suite: no postgres OS user to run PostgreSQL as", nil
	}
	host, err := chdbFromEnv()
	if err != nil {
		return nil, "", err
	}
	if _, err := exec.LookPath("clickhouse-server"); err != nil && host == nil {
		return nil, "chaos suite: no clickhouse-server in PATH", nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	s := &suite{}
	if s.dir, err = os.MkdirTemp("", "ferry-chaos-"); err != nil {
		return nil, "", err
	}
	watchdog("rm -rf " + shellQuote([]string{s.dir}))
	s.bin = filepath.Join(s.dir, "ferry")
	start := time.Now()
	if out, err := exec.Command(goBin, "build", "-o", s.bin, "../../cmd/ferry").CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("go build ferry: %w\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "chaos: built ferry in %s\n", time.Since(start).Round(time.Millisecond))
	if s.pg, err = startPG(pgBin); err != nil {
		s.close()
		return nil, "", fmt.Errorf("start PostgreSQL: %w", err)
	}
	if s.ch, err = startCH(host); err != nil {
		s.close()
		return nil, "", fmt.Errorf("start ClickHouse: %w", err)
	}
	fmt.Fprintf(os.Stderr, "chaos: ClickHouse %s (%s)\n", s.ch.version(), map[bool]string{true: "libchdb", false: "clickhouse-server"}[host != nil])
	if s.pgProxy, err = testkit.StartProxy(fmt.Sprintf("127.0.0.1:%d", s.pg.port)); err != nil {
		s.close()
		return nil, "", err
	}
	if s.chProxy, err = testkit.StartProxy(fmt.Sprintf("127.0.0.1:%d", s.ch.tcp)); err != nil {
		s.close()
		return nil, "", err
	}
	return s, "", nil
}

func (s *suite) close() {
	for _, p := range []*testkit.Proxy{s.pgProxy, s.chProxy} {
		if p != nil {
			p.Close()
		}
	}
	if s.pg != nil {
		s.pg.stop()
	}
	if s.ch != nil {
		s.ch.stop()
	}
	os.RemoveAll(s.dir)
}

// mode is how hard the suite pushes: short by default (CI), long with CHAOS=full.
type mode struct {
	full       bool
	kills      int           // SIGKILLs of ferry
	outage     time.Duration // how long ClickHouse is down
	stall      time.Duration // how long a proxy stalls or throttles
	restarts   int           // PostgreSQL restarts per shutdown mode
	maxTx      int           // rows in the largest transaction
	pause      time.Duration // writer's pause between transactions
	seedRows   int           // accounts rows before ferry starts
	runBetween time.Duration // writing between faults
}

func currentMode() mode {
	if os.Getenv("CHAOS") == "full" {
		return mode{full: true, kills: 20, outage: 30 * time.Second, stall: 15 * time.Second, restarts: 3,
			maxTx: 10000, pause: 5 * time.Millisecond, seedRows: 200000, runBetween: 4 * time.Second}
	}
	return mode{kills: 3, outage: 8 * time.Second, stall: 3 * time.Second, restarts: 1,
		maxTx: 1000, pause: 15 * time.Millisecond, seedRows: 20000, runBetween: 1500 * time.Millisecond}
}

var errExited = errors.New("ferry exited")
