package main

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/goccy/go-yaml"

	"github.com/ferry-cdc/ferry/schema"
)

// tableShapes is --table-shapes: by "schema.table", the layout of the
// ClickHouse table ferry makes. In the config file it is a mapping; on the
// command line or in FERRY_TABLE_SHAPES the same as YAML (or JSON) text.
type tableShapes map[string]schema.Shape

// shapeYAML is one table's entry.
type shapeYAML struct {
	OrderBy     []string          `yaml:"order_by,omitempty"`
	PartitionBy string            `yaml:"partition_by,omitempty"`
	TTL         string            `yaml:"ttl,omitempty"`
	Settings    map[string]any    `yaml:"settings,omitempty"`
	Codecs      map[string]string `yaml:"codecs,omitempty"`
}

// MarshalYAML writes the shapes as the config file takes them (ferry
// config print).
func (t tableShapes) MarshalYAML() (any, error) {
	out := map[string]shapeYAML{}
	for name, sh := range t {
		y := shapeYAML{OrderBy: sh.OrderBy, PartitionBy: sh.PartitionBy, TTL: sh.TTL, Codecs: sh.Codecs}
		if len(sh.Settings) > 0 {
			y.Settings = map[string]any{}
			for k, v := range sh.Settings {
				y.Settings[k] = unquoteSetting(v)
			}
		}
		out[name] = y
	}
	return out, nil
}

// unquoteSetting undoes schema.SettingValue's quoting of a string.
func unquoteSetting(v string) string {
	if len(v) < 2 || v[0] != '\'' || v[len(v)-1] != '\'' {
		return v
	}
	var b strings.Builder
	inner := v[1 : len(v)-1]
	for i := 0; i < len(inner); i++ {
		if inner[i] == '\\' && i+1 < len(inner) {
			i++
		}
		b.WriteByte(inner[i])
	}
	return b.String()
}

// Decode takes the config file's mapping or a YAML text.
func (t *tableShapes) Decode(ctx *kong.DecodeContext) error {
	tok := ctx.Scan.Pop()
	var text []byte
	switch v := tok.Value.(type) {
	case string:
		text = []byte(v)
	default:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		text = b
	}
	shapes, err := parseTableShapes(text)
	if err != nil {
		return err
	}
	*t = shapes
	return nil
}

func parseTableShapes(text []byte) (tableShapes, error) {
	var raw map[string]yaml.RawMessage
	if err := yaml.Unmarshal(text, &raw); err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, fmt.Errorf("not a mapping of schema.table to its shape: %s", strings.TrimSpace(msg))
	}
	out := tableShapes{}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.Count(name, ".") != 1 {
			return nil, fmt.Errorf("%q is not a table's schema.table name", name)
		}
		var y shapeYAML
		if err := yaml.NewDecoder(bytes.NewReader(raw[name]), yaml.DisallowUnknownField()).Decode(&y); err != nil {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			return nil, fmt.Errorf("%s: %s (its keys are order_by, partition_by, ttl, settings, codecs)", name, strings.TrimSpace(msg))
		}
		sh := schema.Shape{OrderBy: y.OrderBy, PartitionBy: strings.TrimSpace(y.PartitionBy), TTL: strings.TrimSpace(y.TTL), Codecs: y.Codecs}
		if len(y.Settings) > 0 {
			sh.Settings = map[string]string{}
			for k, v := range y.Settings {
				sh.Settings[k] = schema.SettingValue(v)
			}
		}
		out[name] = sh
	}
	return out, nil
}
