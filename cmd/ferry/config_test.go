package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

// parse parses args as main does, with the environment it is given.
func parse(t *testing.T, args ...string) (*cli, *kong.Context, error) {
	t.Helper()
	var c cli
	k, err := kong.New(&c, append(kongOptions(), kong.Exit(func(int) { t.Fatal("kong tried to exit") }))...)
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := k.Parse(args)
	return &c, kctx, err
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ferry.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func clearFerryEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "FERRY_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// TestConfigPrecedence: flags > env > file > defaults, key by key.
func TestConfigPrecedence(t *testing.T) {
	clearFerryEnv(t)
	path := writeConfig(t, `
pg: postgres://file@db/app
ch: clickhouse://file@ch:9000
slot: from_file
publication: pub_file
batch-rows: 7
batch-age: 2s
heartbeat: 3s
max-retained-wal: 2GB
tables: [public.a, public.b]
log-level: debug
`)
	t.Setenv("FERRY_SLOT", "from_env")
	t.Setenv("FERRY_BATCH_AGE", "5s")
	c, _, err := parse(t, "--config", path, "run", "--batch-age", "1s", "--publication", "pub_flag")
	if err != nil {
		t.Fatal(err)
	}
	r := c.Run
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"slot (env over file)", r.Slot, "from_env"},
		{"publication (flag over file)", r.Publication, "pub_flag"},
		{"batch-age (flag over env and file)", r.BatchAge, time.Second},
		{"batch-rows (file over default)", r.BatchRows, 7},
		{"heartbeat (file)", r.Heartbeat, 3 * time.Second},
		{"max-retained-wal (file)", r.MaxRetainedWAL, sizeFlag(2e9)},
		{"batch-bytes (default)", r.BatchBytes, 33554432},
		{"metrics-addr (default)", r.MetricsAddr, "127.0.0.1:9187"},
		{"pg (file)", r.PG, "postgres://file@db/app"},
		{"log-level (global, file)", c.LogLevel, "debug"},
		{"tables (list in file)", strings.Join(r.Tables, ","), "public.a,public.b"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.key, tc.got, tc.want)
		}
	}
}

// TestConfigValidation: an unknown key or a bad value is an error that
// names the key; a missing file is an error too.
func TestConfigValidation(t *testing.T) {
	clearFerryEnv(t)
	for _, tc := range []struct{ file, want string }{
		{"pg: x\nch: y\nbatch-rowz: 5\n", "batch-rowz"},
		{"pg: x\nch: y\nbatch-rows: lots\n", "batch-rows"},
		{"pg: x\nch: y\nbatch-age: soon\n", "batch-age"},
		{"pg: x\nch: y\nlog-format: xml\n", "log-format"},
		{"pg: x\nch: y\nmax-retained-wal: big\n", "max-retained-wal"},
		{"pg: x\nch: y\nslot: [a, b]\n", "slot"},
		{"pg: x\nch: y\nconfig: other.yaml\n", "config"},
		{"- just\n- a list\n", "YAML mapping"},
	} {
		_, _, err := parse(t, "--config", writeConfig(t, tc.file), "run")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %q: error %v, want one naming %q", tc.file, err, tc.want)
		}
	}
	if _, _, err := parse(t, "--config", filepath.Join(t.TempDir(), "none.yaml"), "run"); err == nil {
		t.Errorf("a missing config file is no error")
	}
}

// TestSizeFlag parses the units of --max-retained-wal.
func TestSizeFlag(t *testing.T) {
	for in, want := range map[string]sizeFlag{"10GB": 10e9, "512MiB": 512 << 20, "0": 0, "1.5gb": 1.5e9, "100": 100, "2 TB": 2e12} {
		var s sizeFlag
		if err := s.UnmarshalText([]byte(in)); err != nil || s != want {
			t.Errorf("%q: %v, %v; want %v", in, int64(s), err, int64(want))
		}
	}
	for _, in := range []string{"", "GB", "-1GB", "ten"} {
		var s sizeFlag
		if err := s.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("%q parsed as %d", in, int64(s))
		}
	}
}

// TestConfigPrint shows each effective value with its source, passwords
// redacted.
func TestConfigPrint(t *testing.T) {
	bin := ferryBinary(t)
	path := writeConfig(t, "pg: postgres://u:"+testPassword+"@db/app\nbatch-rows: 9\n")
	cmd := exec.Command(bin, "--config", path, "config", "print", "--slot", "s1")
	cmd.Env = append(cleanEnv(), "FERRY_CH_URL=clickhouse://default:"+testPassword+"@ch:9000")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("config print: %v\n%s", err, out)
	}
	assertNoPassword(t, "ferry config print", string(out))
	for _, want := range []string{"batch-rows: 9  # config file", "slot: s1  # flag", "ch: clickhouse://default:xxxxx@ch:9000  # env FERRY_CH_URL",
		"pg: postgres://u:xxxxx@db/app  # config file", "batch-age: 300ms  # default", "max-retained-wal: 10GB  # default"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config print lacks %q:\n%s", want, out)
		}
	}
}

// TestFilterFlags: a row filter's commas stay in its condition, from the
// command line and from the config file, and both lists reach the
// replicator's configuration.
func TestFilterFlags(t *testing.T) {
	clearFerryEnv(t)
	path := writeConfig(t, `
pg: postgres://file@db/app
exclude-columns: [public.users.email, public.users.phone]
row-filter:
  - "public.orders:WHERE region IN ('eu', 'us')"
  - "public.users:WHERE id > 10"
`)
	c, _, err := parse(t, "--config", path, "run")
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Run.replicatorConfig(nil, nil)
	if got := strings.Join(cfg.ExcludeColumns, "|"); got != "public.users.email|public.users.phone" {
		t.Errorf("exclude-columns from the file: %q", got)
	}
	if got := strings.Join(cfg.RowFilters, "|"); got != "public.orders:WHERE region IN ('eu', 'us')|public.users:WHERE id > 10" {
		t.Errorf("row-filter from the file: %q", got)
	}
	c, _, err = parse(t, "--config", path, "run", "--row-filter", "public.t:WHERE a IN (1, 2)", "--row-filter", "public.u:b = 'x,y'",
		"--exclude-columns", "public.t.c,public.t.d")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Run.RowFilter, "|"); got != "public.t:WHERE a IN (1, 2)|public.u:b = 'x,y'" {
		t.Errorf("row-filter flags: %q", got)
	}
	if got := strings.Join(c.Run.ExcludeColumns, "|"); got != "public.t.c|public.t.d" {
		t.Errorf("exclude-columns flag: %q", got)
	}
}
