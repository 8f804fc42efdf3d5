package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// manifest is a Kubernetes object as a generic map.
type manifest = map[string]any

// loadManifests parses every YAML file in deploy/k8s, one object each.
func loadManifests(t *testing.T) map[string]manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "deploy/k8s/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/k8s")
	}
	out := map[string]manifest{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains("\n"+string(raw), "\n---") {
			t.Errorf("%s: one object per file, please", f)
		}
		var m manifest
		if err := yaml.UnmarshalStrict(raw, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, k := range []string{"apiVersion", "kind"} {
			if s, _ := m[k].(string); s == "" {
				t.Errorf("%s: no %s", f, k)
			}
		}
		if m["kind"] != "Kustomization" && str(m, "metadata", "name") == "" {
			t.Errorf("%s: no metadata.name", f)
		}
		out[filepath.Base(f)] = m
	}
	return out
}

func TestK8sManifests(t *testing.T) {
	ms := loadManifests(t)
	kinds := map[string]string{
		"deployment.yaml":     "Deployment",
		"configmap.yaml":      "ConfigMap",
		"service.yaml":        "Service",
		"secret.example.yaml": "Secret",
		"kustomization.yaml":  "Kustomization",
	}
	for file, kind := range kinds {
		if m, ok := ms[file]; !ok {
			t.Errorf("deploy/k8s/%s is missing", file)
		} else if m["kind"] != kind {
			t.Errorf("%s: kind %v, want %s", file, m["kind"], kind)
		}
	}
	if t.Failed() {
		return
	}
	dep, cm, svc, secret := ms["deployment.yaml"], ms["configmap.yaml"], ms["service.yaml"], ms["secret.example.yaml"]

	// One replica per slot, replaced by Recreate.
	if n, _ := get(dep, "spec", "replicas").(float64); n != 1 {
		t.Errorf("deployment: replicas %v, want 1 (one reader per replication slot)", get(dep, "spec", "replicas"))
	}
	if s := str(dep, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("deployment: strategy %q, want Recreate", s)
	}
	podLabels, _ := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	selector, _ := get(dep, "spec", "selector", "matchLabels").(map[string]any)
	if !subset(selector, podLabels) {
		t.Errorf("deployment: selector %v does not match the pod's labels %v", selector, podLabels)
	}
	containers, _ := get(dep, "spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("deployment: %d containers, want 1", len(containers))
	}
	c := containers[0].(map[string]any)
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if got := str(c, probe, "httpGet", "path"); got != path {
			t.Errorf("deployment: %s path %q, want %s", probe, got, path)
		}
		if got := get(c, probe, "httpGet", "port"); got != "metrics" {
			t.Errorf("deployment: %s port %v, want the named port metrics", probe, got)
		}
	}
	ports, _ := c["ports"].([]any)
	if len(ports) != 1 || str(ports[0].(map[string]any), "name") != "metrics" || get(ports[0].(map[string]any), "containerPort") != float64(9187) {
		t.Errorf("deployment: ports %v, want metrics 9187", ports)
	}
	args := strs(c["args"])
	if !slices.Equal(args, []string{"--config", "/etc/ferry/ferry.yaml", "run"}) {
		t.Errorf("deployment: args %v", args)
	}

	// The URLs come from the Secret, the rest from the ConfigMap.
	secretKeys := map[string]bool{}
	for k := range get(secret, "stringData").(map[string]any) {
		secretKeys[k] = true
	}
	env := map[string]bool{}
	for _, e := range get(c, "env").([]any) {
		e := e.(map[string]any)
		env[str(e, "name")] = true
		if ref := get(e, "valueFrom", "secretKeyRef"); ref != nil {
			ref := ref.(map[string]any)
			if str(ref, "name") != str(secret, "metadata", "name") || !secretKeys[str(ref, "key")] {
				t.Errorf("deployment: env %s refers to secret %s key %s, which secret.example.yaml does not have", str(e, "name"), str(ref, "name"), str(ref, "key"))
			}
		}
	}
	for _, k := range []string{"FERRY_PG_URL", "FERRY_CH_URL"} {
		if !env[k] {
			t.Errorf("deployment: %s not set", k)
		}
	}
	var mountPath string
	for _, vm := range get(c, "volumeMounts").([]any) {
		mountPath = str(vm.(map[string]any), "mountPath")
	}
	var cmName string
	for _, v := range get(dep, "spec", "template", "spec", "volumes").([]any) {
		cmName = str(v.(map[string]any), "configMap", "name")
	}
	if cmName != str(cm, "metadata", "name") || mountPath+"/ferry.yaml" != args[1] {
		t.Errorf("deployment: mounts configmap %q at %q; want %q holding %s", cmName, mountPath, str(cm, "metadata", "name"), args[1])
	}
	checkFerryYAML(t, str(cm, "data", "ferry.yaml"))

	// The Service selects the pod and carries the scrape annotations.
	if !subset(get(svc, "spec", "selector").(map[string]any), podLabels) {
		t.Errorf("service: selector does not match the pod's labels")
	}
	for _, obj := range []map[string]any{svc, get(dep, "spec", "template").(map[string]any)} {
		ann, _ := get(obj, "metadata", "annotations").(map[string]any)
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "9187" || ann["prometheus.io/path"] != "/metrics" {
			t.Errorf("scrape annotations missing or wrong: %v", ann)
		}
	}
	sp := get(svc, "spec", "ports").([]any)[0].(map[string]any)
	if sp["port"] != float64(9187) || sp["targetPort"] != "metrics" {
		t.Errorf("service: port %v -> %v, want 9187 -> metrics", sp["port"], sp["targetPort"])
	}

	// Kustomize applies everything but the example Secret.
	res := strs(get(ms["kustomization.yaml"], "resources"))
	for file := range ms {
		want := file != "kustomization.yaml" && file != "secret.example.yaml"
		if slices.Contains(res, file) != want {
			t.Errorf("kustomization: %s listed = %v, want %v", file, !want, want)
		}
	}
}

// checkFerryYAML checks that ferry.yaml of the ConfigMap parses, uses only
// keys that deploy/ferry.example.yaml documents (set or commented out),
// serves metrics beyond the pod, and holds no URL with a password.
func checkFerryYAML(t *testing.T, text string) {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatalf("configmap ferry.yaml: %v", err)
	}
	example, err := os.ReadFile(filepath.Join(root, "deploy/ferry.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#? ?([a-z][a-z-]*):`).FindAllStringSubmatch(string(example), -1) {
		documented[m[1]] = true
	}
	for k := range cfg {
		if !documented[k] {
			t.Errorf("configmap ferry.yaml: key %q is not in deploy/ferry.example.yaml", k)
		}
	}
	for _, k := range []string{"pg", "ch"} {
		if _, ok := cfg[k]; ok {
			t.Errorf("configmap ferry.yaml sets %s; it comes from the Secret", k)
		}
	}
	if cfg["metrics-addr"] != "0.0.0.0:9187" {
		t.Errorf("configmap ferry.yaml: metrics-addr %v, want 0.0.0.0:9187 (probes and Prometheus come from outside the pod)", cfg["metrics-addr"])
	}
}

// get walks nested maps; nil when a step is missing.
func get(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func str(m map[string]any, path ...string) string {
	s, _ := get(m, path...).(string)
	return s
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// subset reports whether every label of a is in b with the same value.
func subset(a, b map[string]any) bool {
	if len(a) == 0 {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
