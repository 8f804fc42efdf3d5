package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestJSONTypeFlag runs the binary with --json-type=json. On a ClickHouse
// older than 25.3, run and verify refuse it and check lists it, each naming
// the flag, the server's version and the fix; on a newer one run makes JSON
// columns and verify, given the same flag, compares them. --sink kafka
// refuses it on either.
func TestJSONTypeFlag(t *testing.T) {
	e := newOpsEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY, j jsonb)`, `INSERT INTO t VALUES (1, '{"b": [1, 2.5], "a": "x"}'), (2, NULL)`)
	out, err := e.ferry(e.args("run", "--sink", "kafka", "--json-type", "json", "--kafka-brokers", "127.0.0.1:1", "--metrics-addr", "")...)
	if err == nil || !strings.Contains(out, "--json-type=json is for the direct ClickHouse sink") {
		t.Errorf("run --sink kafka --json-type=json: err %v\n%s", err, out)
	}
	out, err = e.ferry(e.args("check", "--json-type", "json")...)
	version := ""
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "ok      ClickHouse "); ok {
			version, _, _ = strings.Cut(v, " ")
		}
	}
	if version == "" {
		t.Fatalf("check printed no ClickHouse version: err %v\n%s", err, out)
	}
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		t.Fatalf("ClickHouse version %q: %v", version, err)
	}
	if major < 25 || major == 25 && minor < 3 {
		for _, cmd := range [][]string{{"check", "--json-type", "json"}, {"run", "--catch-up", "--json-type", "json", "--metrics-addr", ""}, {"verify", "--json-type", "json"}} {
			out, err := e.ferry(e.args(cmd...)...)
			if err == nil || !strings.Contains(out, "--json-type=json needs ClickHouse 25.3 or later") ||
				!strings.Contains(out, "the server is ClickHouse "+version) || !strings.Contains(out, "--json-type=string") {
				t.Errorf("%s on ClickHouse %s: err %v\n%s", cmd[0], version, err, out)
			}
		}
		return
	}
	if err != nil || strings.Contains(out, "json-type") {
		t.Errorf("check --json-type=json on ClickHouse %s: err %v\n%s", version, err, out)
	}
	if out, err := e.ferry(e.args("run", "--catch-up", "--json-type", "json", "--metrics-addr", "")...); err != nil {
		t.Fatalf("ferry run --catch-up --json-type=json: %v\n%s", err, out)
	}
	if out, err := e.ferry(e.args("verify", "--json-type", "json")...); err != nil || !strings.Contains(out, "ok       public.t: 2 rows") {
		t.Errorf("verify --json-type=json: err %v\n%s", err, out)
	}
}
