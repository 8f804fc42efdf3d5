// Package deploytest checks the deployment files: docker-compose.yaml (loaded
// with the compose-spec loader, as docker compose does), the Prometheus and
// Grafana files it mounts, and the Kubernetes manifests in deploy/k8s. No
// Docker engine or cluster is needed.
package deploytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

// root is the repository's root, seen from this package's directory.
const root = "../.."

func loadCompose(t *testing.T, profiles ...string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yaml")},
		cli.WithWorkingDirectory(root),
		cli.WithEnv([]string{}), // the file's defaults, whatever this machine's environment says
		cli.WithProfiles(profiles),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load docker-compose.yaml: %v", err)
	}
	return p
}

var (
	baseServices  = []string{"postgres", "clickhouse", "ferry-setup", "ferry", "loadgen", "prometheus", "grafana"}
	kafkaServices = []string{"kafka", "ferry-kafka", "kafka-loader"}
	oneShot       = []string{"ferry-setup"} // run once, no healthcheck: others wait for their completion
)

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	if got := sorted(p.ServiceNames()); !slices.Equal(got, sorted(baseServices)) {
		t.Errorf("services without a profile: %v, want %v", got, sorted(baseServices))
	}
	if got := sorted(p.DisabledServiceNames()); !slices.Equal(got, sorted(kafkaServices)) {
		t.Errorf("services behind a profile: %v, want %v", got, sorted(kafkaServices))
	}
	for _, name := range kafkaServices {
		if s := p.DisabledServices[name]; !slices.Equal(s.Profiles, []string{"kafka"}) {
			t.Errorf("%s: profiles %v, want [kafka]", name, s.Profiles)
		}
	}
	k := loadCompose(t, "kafka")
	if got, want := sorted(k.ServiceNames()), sorted(append(slices.Clone(baseServices), kafkaServices...)); !slices.Equal(got, want) {
		t.Errorf("services with --profile kafka: %v, want %v", got, want)
	}
}

func TestComposeImagesAndCommands(t *testing.T) {
	p := loadCompose(t, "kafka")
	want := map[string]string{
		"postgres":   "postgres:17",
		"loadgen":    "postgres:17",
		"clickhouse": "clickhouse/clickhouse-server:25.8",
	}
	for name, image := range want {
		if got := p.Services[name].Image; got != image {
			t.Errorf("%s: image %q, want %q", name, got, image)
		}
	}
	pg := p.Services["postgres"]
	if !containsSeq(pg.Command, "-c", "wal_level=logical") {
		t.Errorf("postgres: command %v lacks -c wal_level=logical", pg.Command)
	}
	for _, name := range []string{"ferry-setup", "ferry", "ferry-kafka", "kafka-loader"} {
		s := p.Services[name]
		if s.Build == nil || s.Image != "ferry:local" {
			t.Errorf("%s: want build from deploy/Dockerfile and image ferry:local, got build %v image %q", name, s.Build, s.Image)
		}
	}
	cmds := map[string][]string{
		"ferry-setup":  {"setup"},
		"ferry":        {"run", "--metrics-addr", "0.0.0.0:9187"},
		"ferry-kafka":  {"run", "--sink=kafka", "--kafka-brokers=kafka:9092"},
		"kafka-loader": {"load", "--from-kafka", "--kafka-brokers=kafka:9092", "--group=ferry-loader"},
	}
	for name, args := range cmds {
		got := p.Services[name].Command
		for _, a := range args {
			if !slices.Contains(got, a) {
				t.Errorf("%s: command %v lacks %q", name, got, a)
			}
		}
	}
	// The two pipelines must not share a slot.
	if !slices.Contains(p.Services["ferry-kafka"].Command, "--slot=ferry_kafka") {
		t.Errorf("ferry-kafka: command %v does not use a slot of its own", p.Services["ferry-kafka"].Command)
	}
	for _, name := range []string{"ferry", "ferry-setup", "ferry-kafka"} {
		env := p.Services[name].Environment
		for _, k := range []string{"FERRY_PG_URL", "FERRY_CH_URL"} {
			if v := env[k]; v == nil || *v == "" {
				t.Errorf("%s: %s not set", name, k)
			}
		}
	}
}

func TestComposePorts(t *testing.T) {
	p := loadCompose(t, "kafka")
	want := map[string][]uint32{
		"postgres":   {5432},
		"clickhouse": {9000, 8123},
		"ferry":      {9187},
		"prometheus": {9090},
		"grafana":    {3000},
	}
	for name, s := range p.Services {
		var got []uint32
		for _, port := range s.Ports {
			got = append(got, port.Target)
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s: port %d published on %q, want 127.0.0.1 only", name, port.Target, port.HostIP)
			}
			if port.Published == "" {
				t.Errorf("%s: port %d has no published port", name, port.Target)
			}
		}
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s: container ports %v, want %v", name, got, want[name])
		}
	}
}

func TestComposeHealthAndDependencies(t *testing.T) {
	p := loadCompose(t, "kafka")
	for name, s := range p.Services {
		hc := s.HealthCheck
		switch {
		case slices.Contains(oneShot, name):
			if s.Restart != "no" {
				t.Errorf("%s: a one-shot service should not restart (restart %q)", name, s.Restart)
			}
		case hc == nil || hc.Disable || len(hc.Test) < 2:
			t.Errorf("%s: no healthcheck", name)
		case hc.Interval == nil || hc.Timeout == nil || hc.Retries == nil:
			t.Errorf("%s: healthcheck lacks interval, timeout or retries", name)
		}
		if !slices.Contains(oneShot, name) && s.Restart != "unless-stopped" {
			t.Errorf("%s: restart %q, want unless-stopped", name, s.Restart)
		}
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				t.Errorf("%s depends on unknown service %s", name, dep)
				continue
			}
			switch d.Condition {
			case types.ServiceConditionHealthy:
				if target.HealthCheck == nil {
					t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
				}
			case types.ServiceConditionCompletedSuccessfully:
				if !slices.Contains(oneShot, dep) {
					t.Errorf("%s waits for %s to complete, which runs until stopped", name, dep)
				}
			case types.ServiceConditionStarted:
			default:
				t.Errorf("%s -> %s: condition %q", name, dep, d.Condition)
			}
		}
	}
	// What must wait for what.
	for _, e := range []struct{ from, to, cond string }{
		{"ferry-setup", "postgres", types.ServiceConditionHealthy},
		{"ferry", "ferry-setup", types.ServiceConditionCompletedSuccessfully},
		{"ferry", "postgres", types.ServiceConditionHealthy},
		{"ferry", "clickhouse", types.ServiceConditionHealthy},
		{"loadgen", "postgres", types.ServiceConditionHealthy},
		{"grafana", "prometheus", types.ServiceConditionHealthy},
		{"ferry-kafka", "kafka", types.ServiceConditionHealthy},
		{"kafka-loader", "kafka", types.ServiceConditionHealthy},
		{"kafka-loader", "clickhouse", types.ServiceConditionHealthy},
	} {
		if got := p.Services[e.from].DependsOn[e.to].Condition; got != e.cond {
			t.Errorf("%s -> %s: condition %q, want %q", e.from, e.to, got, e.cond)
		}
	}
}

// TestComposeFilesExist checks that every bind mount and build input is in
// the repository, and that every named volume is declared, so that
// `docker compose down -v` removes all state.
func TestComposeFilesExist(t *testing.T) {
	p := loadCompose(t, "kafka")
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	binds := map[string]string{} // container path -> host path
	for name, s := range p.Services {
		if s.Build != nil {
			ctxDir := s.Build.Context
			mustExist(t, name+": build context", ctxDir)
			mustExist(t, name+": Dockerfile", filepath.Join(ctxDir, s.Build.Dockerfile))
		}
		for _, v := range s.Volumes {
			switch v.Type {
			case types.VolumeTypeBind:
				mustExist(t, name+": bind mount", v.Source)
				if rel, err := filepath.Rel(abs, v.Source); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s: bind mount %s is outside the repository", name, v.Source)
				}
				if !v.ReadOnly {
					t.Errorf("%s: bind mount %s is writable; mount it :ro", name, v.Source)
				}
				binds[v.Target] = v.Source
			case types.VolumeTypeVolume:
				if _, ok := p.Volumes[v.Source]; !ok {
					t.Errorf("%s: volume %q is not declared under volumes:", name, v.Source)
				}
			default:
				t.Errorf("%s: volume %s of type %s", name, v.Source, v.Type)
			}
		}
	}
	// The pgbench scripts the load generator names must be in its mount.
	for _, arg := range p.Services["loadgen"].Command {
		file, ok := strings.CutPrefix(arg, "--file=")
		if !ok {
			continue
		}
		file, _, _ = strings.Cut(file, "@")
		host, ok := binds[filepath.Dir(file)]
		if !ok {
			t.Errorf("loadgen: %s is not in a mounted directory", file)
			continue
		}
		mustExist(t, "loadgen script", filepath.Join(host, filepath.Base(file)))
	}
}

// TestPrometheusAndGrafana checks that Prometheus scrapes the ferry services
// where they serve metrics and that the dashboard's queries use metrics
// ferry has.
func TestPrometheusAndGrafana(t *testing.T) {
	p := loadCompose(t, "kafka")
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	readYAML(t, filepath.Join(root, "deploy/prometheus/prometheus.yml"), &prom)
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.JobName == "ferry" {
			for _, s := range sc.StaticConfigs {
				targets = append(targets, s.Targets...)
			}
		}
	}
	for _, name := range []string{"ferry", "ferry-kafka", "kafka-loader"} {
		if !slices.Contains(targets, name+":9187") {
			t.Errorf("prometheus does not scrape %s:9187 (targets %v)", name, targets)
		}
		if !slices.ContainsFunc(p.Services[name].Command, func(a string) bool { return strings.Contains(a, "0.0.0.0:9187") }) {
			t.Errorf("%s does not serve metrics on 0.0.0.0:9187: %v", name, p.Services[name].Command)
		}
	}

	src, err := os.ReadFile(filepath.Join(root, "cmd/ferry/metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(ferry_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		known[m[1]] = true
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy/grafana/dashboards/ferry.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("ferry.json: %v", err)
	}
	used := map[string]bool{}
	metric := regexp.MustCompile(`ferry_[a-z_]+`)
	for _, panel := range dash.Panels {
		if len(panel.Targets) == 0 {
			t.Errorf("panel %q has no query", panel.Title)
		}
		for _, tg := range panel.Targets {
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
				if !known[base] && !known[m] {
					t.Errorf("panel %q: %s is not a metric of cmd/ferry/metrics.go", panel.Title, m)
				}
				used[base] = true
			}
		}
	}
	for _, m := range []string{"ferry_lag_bytes", "ferry_lag_seconds", "ferry_changes_total", "ferry_flush_duration_seconds", "ferry_slot_retained_wal_bytes"} {
		if !used[m] {
			t.Errorf("the dashboard does not chart %s", m)
		}
	}
	var dsFile struct {
		Datasources []struct {
			UID string `json:"uid"`
			URL string `json:"url"`
		} `json:"datasources"`
	}
	readYAML(t, filepath.Join(root, "deploy/grafana/provisioning/datasources/prometheus.yaml"), &dsFile)
	if len(dsFile.Datasources) != 1 || dsFile.Datasources[0].UID != "prometheus" || dsFile.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("grafana datasource: %+v, want uid prometheus at http://prometheus:9090", dsFile.Datasources)
	}
	if !strings.Contains(string(raw), `"uid": "prometheus"`) {
		t.Error("the dashboard does not use the provisioned datasource (uid prometheus)")
	}
	var provider struct {
		Providers []struct {
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	readYAML(t, filepath.Join(root, "deploy/grafana/provisioning/dashboards/ferry.yaml"), &provider)
	var mounted bool
	for _, v := range p.Services["grafana"].Volumes {
		for _, pr := range provider.Providers {
			mounted = mounted || (v.Target == pr.Options.Path && strings.HasSuffix(v.Source, filepath.FromSlash("deploy/grafana/dashboards")))
		}
	}
	if !mounted {
		t.Error("grafana: the dashboard provider's path is not where deploy/grafana/dashboards is mounted")
	}
}

func mustExist(t *testing.T, what, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// containsSeq reports whether seq appears in s, consecutively.
func containsSeq(s []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(s); i++ {
		if slices.Equal(s[i:i+len(seq)], seq) {
			return true
		}
	}
	return false
}
