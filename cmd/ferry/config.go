package main

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/goccy/go-yaml"

	"github.com/ferry-cdc/ferry/replicator"
)

// loadYAML is the kong.ConfigurationLoader of --config: a YAML mapping of
// flag names (kebab-case, as on the command line) to values. A file value
// applies only where neither the flag nor its environment variable is
// set, which gives flags > env > file > defaults: kong itself applies
// environment variables before resolvers and would let the file win.
func loadYAML(r io.Reader) (kong.Resolver, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		return nil, fmt.Errorf("not a YAML mapping of flag names to values: %w", err)
	}
	return &yamlResolver{values: values}, nil
}

type yamlResolver struct {
	values map[string]any
}

// notInFile are flags a config file cannot set.
var notInFile = map[string]bool{"config": true, "help": true}

// Validate rejects keys that are no flag of any command.
func (y *yamlResolver) Validate(app *kong.Application) error {
	known := map[string]bool{}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			known[f.Name] = true
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(app.Node)
	var bad []string
	for k := range y.values {
		if !known[k] || notInFile[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("config file: unknown key %s (keys are the flags' names, e.g. batch-rows; see ferry --help)", strings.Join(bad, ", "))
	}
	return nil
}

// Resolve returns the file's value for flag, after checking that it
// parses, so that a bad value is reported with its key.
func (y *yamlResolver) Resolve(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
	v, ok := y.values[flag.Name]
	if !ok || notInFile[flag.Name] {
		return nil, nil
	}
	for _, env := range flag.Envs {
		if _, set := os.LookupEnv(env); set {
			return nil, nil
		}
	}
	if v == nil {
		return nil, fmt.Errorf("config file: key %s has no value", flag.Name)
	}
	if _, isList := v.([]any); isList && !flag.IsSlice() {
		return nil, fmt.Errorf("config file: key %s: a list where one value is expected", flag.Name)
	}
	scratch := reflect.New(flag.Target.Type()).Elem()
	if err := flag.Parse(kong.Scan().PushTyped(v, kong.FlagValueToken), scratch); err != nil {
		return nil, fmt.Errorf("config file: key %s: %w", flag.Name, err)
	}
	if flag.Enum != "" {
		if err := checkEnum(flag, fmt.Sprint(v)); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func checkEnum(flag *kong.Flag, v string) error {
	for _, e := range strings.Split(flag.Enum, ",") {
		if strings.TrimSpace(e) == v {
			return nil
		}
	}
	return fmt.Errorf("config file: key %s: %q is not one of %s", flag.Name, v, flag.Enum)
}

// configCmd groups the config subcommands.
type configCmd struct {
	Print configPrintCmd `cmd:"" help:"Print the effective configuration of ferry run (flags > env > config file > defaults), secrets redacted."`
}

// configPrintCmd takes the flags of ferry run, so it resolves them the
// same way.
type configPrintCmd struct {
	runCmd
}

// Run prints every flag of the command line path as YAML that --config
// accepts, each with where its value came from.
func (c *configPrintCmd) Run(kctx *kong.Context) error {
	fromArgs := map[string]bool{}
	fromFile := map[string]bool{}
	for _, p := range kctx.Path {
		if p.Flag == nil {
			continue
		}
		if p.Resolved {
			fromFile[p.Flag.Name] = true
		} else {
			fromArgs[p.Flag.Name] = true
		}
	}
	out := kctx.Stdout
	for _, f := range kctx.Flags() {
		if notInFile[f.Name] || f.Hidden {
			continue
		}
		source := "default"
		switch {
		case fromArgs[f.Name]:
			source = "flag"
		case fromFile[f.Name]:
			source = "config file"
		case envSet(f.Envs) != "":
			source = "env " + envSet(f.Envs)
		}
		v, _ := yaml.Marshal(map[string]any{f.Name: redactValue(f.Name, f.Target.Interface())})
		fmt.Fprintf(out, "%s  # %s\n", strings.TrimRight(string(v), "\n"), source)
	}
	return nil
}

func envSet(envs []string) string {
	for _, e := range envs {
		if _, ok := os.LookupEnv(e); ok {
			return e
		}
	}
	return ""
}

// redactValue hides the password of connection URLs and any value of a
// flag named like a secret.
func redactValue(name string, v any) any {
	s, ok := v.(string)
	if !ok {
		if d, isDur := v.(fmt.Stringer); isDur {
			return d.String()
		}
		return v
	}
	switch {
	case strings.Contains(name, "password") || strings.Contains(name, "secret"):
		if s != "" {
			return "xxxxx"
		}
	case strings.Contains(s, "://") || strings.Contains(s, "password"):
		return replicator.Redact(s)
	}
	return s
}

// sizeFlag is a flag value in bytes written with a unit: 10GB, 512MiB, 0.
type sizeFlag int64

var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}, {"", 1},
}

func (b *sizeFlag) UnmarshalText(text []byte) error {
	s := strings.ToUpper(strings.TrimSpace(string(text)))
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		var f float64
		if _, err := fmt.Sscan(strings.TrimSpace(num), &f); err != nil || f < 0 {
			break
		}
		*b = sizeFlag(f * u.mult)
		return nil
	}
	return fmt.Errorf("%q is not a size: want a number with a unit such as 10GB or 512MiB", string(text))
}

func (b sizeFlag) String() string {
	switch {
	case b != 0 && b%1e9 == 0:
		return fmt.Sprintf("%dGB", b/1e9)
	case b != 0 && b%1e6 == 0:
		return fmt.Sprintf("%dMB", b/1e6)
	}
	return fmt.Sprintf("%dB", int64(b))
}
