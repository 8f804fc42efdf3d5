package schema

import (
	"strings"
	"testing"
)

func shapeTable() Table {
	return Table{Schema: "public", Name: "orders", Columns: []Column{
		{Name: "tenant", TypeOID: 23, TypeMod: -1, Key: true, NotNull: true},
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true, NotNull: true},
		{Name: "body", TypeOID: 25, TypeMod: -1},
	}}
}

func TestShapedDDL(t *testing.T) {
	m, err := Map(shapeTable(), CapabilitiesFor(24, 8))
	if err != nil {
		t.Fatal(err)
	}
	err = m.SetShape(Shape{OrderBy: []string{"id", "tenant"}, PartitionBy: "tenant % 4", TTL: "_ferry_synced_at + INTERVAL 1 YEAR",
		Settings: map[string]string{"index_granularity": "512", "storage_policy": "'hot'"}, Codecs: map[string]string{"body": "ZSTD(3)"}}, "tables: public.orders")
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE TABLE IF NOT EXISTS `db`.`orders` (\n" +
		"    `tenant` Int32,\n    `id` Int64,\n    `body` Nullable(String) CODEC(ZSTD(3)),\n" +
		"    `_ferry_version` UInt64,\n    `_ferry_deleted` UInt8,\n    `_ferry_synced_at` DateTime DEFAULT now()\n" +
		") ENGINE = ReplacingMergeTree(`_ferry_version`, `_ferry_deleted`)\n" +
		"PARTITION BY tenant % 4\n" +
		"ORDER BY (`id`, `tenant`)\n" +
		"TTL _ferry_synced_at + INTERVAL 1 YEAR\n" +
		"SETTINGS index_granularity = 512, storage_policy = 'hot'"
	if got := m.CreateTableDDL("db"); got != want {
		t.Errorf("DDL:\n%s\nwant:\n%s", got, want)
	}
	// The Distributed table shards by the key in its own order, whatever
	// the ORDER BY: a table made before a shape keeps its rows' shards.
	if got := m.ShardingKey(); got != "cityHash64(`tenant`, `id`)" {
		t.Errorf("ShardingKey = %s", got)
	}
	local := m.ClusterDDL("db", "c")[0]
	for _, part := range []string{"ReplicatedReplacingMergeTree(", "PARTITION BY tenant % 4\nORDER BY (`id`, `tenant`)\nTTL", "CODEC(ZSTD(3))"} {
		if !strings.Contains(local, part) {
			t.Errorf("cluster DDL lacks %q:\n%s", part, local)
		}
	}
}

func TestSetShapeRefuses(t *testing.T) {
	for _, c := range []struct {
		table Table
		shape Shape
		want  string
	}{
		{shapeTable(), Shape{OrderBy: []string{"id"}}, "[id] is not the key of public.orders in some order (its key is tenant, id)"},
		{shapeTable(), Shape{OrderBy: []string{"id", "tenant", "body"}}, "a column beyond the key would leave a row's old version live"},
		{shapeTable(), Shape{Codecs: map[string]string{"bdy": "ZSTD"}}, `has no column "bdy"`},
		{shapeTable(), Shape{Settings: map[string]string{"index granularity": "1"}}, "is not a setting's name"},
		{appendOnlyTable(), Shape{OrderBy: []string{"id"}}, "is ordered by ferry's own columns (_ferry_version, _ferry_seq); remove order_by"},
	} {
		m, err := Map(c.table, CapabilitiesFor(24, 8))
		if err != nil {
			t.Fatal(err)
		}
		err = m.SetShape(c.shape, "tables: x")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetShape(%+v) = %v, want %q", c.shape, err, c.want)
		}
		if !m.Shape.IsZero() {
			t.Errorf("a refused shape was kept: %+v", m.Shape)
		}
	}
}
