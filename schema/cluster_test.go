package schema

import (
	"strings"
	"testing"
)

// renderCluster is what a cluster golden file holds: the CREATE statements,
// an ALTER of each kind, the TRUNCATE and the DROPs, as ferry runs them with
// --ch-cluster.
func renderCluster(m *TableMap, cluster string) string {
	const db = "ferry db"
	var b strings.Builder
	b.WriteString(CreateDatabaseSQL(db, cluster) + "\n\n")
	for _, q := range m.ClusterDDL(db, cluster) {
		b.WriteString(q + "\n\n")
	}
	b.WriteString(m.InsertSQL(db) + "\n\n")
	col := ColumnMap{Name: "note", Type: "Nullable(String)"}
	renamed := ColumnMap{Name: "remark", Type: "Nullable(String)"}
	for _, c := range []ColumnChange{
		{Kind: ColumnAdded, To: &col},
		{Kind: ColumnRenamed, From: &col, To: &renamed},
		{Kind: ColumnRetyped, From: &renamed, To: &ColumnMap{Name: "remark", Type: "String"}},
		{Kind: ColumnDropped, From: &renamed},
	} {
		for _, q := range m.ClusterAlterSQL(db, cluster, c) {
			b.WriteString(q + "\n")
		}
	}
	b.WriteString("\n" + m.TruncateSQL(db, cluster) + "\n")
	b.WriteString(DropTableSQL(db, m.Name, cluster) + "\n")
	b.WriteString(DropTableSQL(db, LocalName(m.Name), cluster) + "\n")
	return b.String()
}

func TestClusterGolden(t *testing.T) {
	orders := Table{Schema: "sales", Name: "orders", Columns: []Column{
		{Name: "region", TypeOID: 25, TypeMod: -1, Key: true, NotNull: true},
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true, NotNull: true},
		{Name: "total", TypeOID: 1700, TypeMod: numericMod(10, 2)},
		{Name: "placed at", TypeOID: 1184, TypeMod: -1, NotNull: true},
		{Name: "paid", TypeOID: 16, TypeMod: -1},
	}}
	tests := []struct {
		file  string
		table Table
		caps  Capabilities
	}{
		{"cluster_24_8.golden", orders, CapabilitiesFor(24, 8)},
		{"cluster_18_16.golden", orders, CapabilitiesFor(18, 16)},
		{"cluster_append_only_24_8.golden", appendOnlyTable(), CapabilitiesFor(24, 8)},
		{"cluster_full_row_18_16.golden", fullRowTable(), CapabilitiesFor(18, 16)},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			m, err := Map(tt.table, tt.caps)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.file, renderCluster(m, "analytics"))
		})
	}
}

// TestClusterDDLShape checks what the golden files show, independently.
func TestClusterDDLShape(t *testing.T) {
	m, err := Map(everyType(), CapabilitiesFor(24, 8))
	if err != nil {
		t.Fatal(err)
	}
	ddl := m.ClusterDDL("db", "c")
	if len(ddl) != 2 {
		t.Fatalf("%d statements, want 2", len(ddl))
	}
	local, dist := ddl[0], ddl[1]
	single := m.CreateTableDDL("db")
	// The local table is the single-server one, renamed, ON CLUSTER and
	// replicated; nothing else differs.
	want := strings.Replace(single, "`db`.`sales__every type` (", "`db`.`sales__every type_local` ON CLUSTER `c` (", 1)
	want = strings.Replace(want, "ENGINE = ReplacingMergeTree(`_ferry_version`, `_ferry_deleted`)",
		"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', `_ferry_version`, `_ferry_deleted`)", 1)
	if local != want {
		t.Errorf("local DDL:\n%s\nwant:\n%s", local, want)
	}
	if !strings.Contains(dist, "AS `db`.`sales__every type_local`") ||
		!strings.HasSuffix(dist, "ENGINE = Distributed('c', 'db', 'sales__every type_local', cityHash64(`id`, `region`))") {
		t.Errorf("distributed DDL:\n%s", dist)
	}
	for _, q := range ddl {
		if strings.Contains(q, ";") {
			t.Errorf("DDL holds a semicolon:\n%s", q)
		}
	}
	if got := m.TruncateSQL("db", ""); got != "TRUNCATE TABLE IF EXISTS `db`.`sales__every type`" {
		t.Errorf("TruncateSQL without a cluster: %s", got)
	}
	if got := CreateDatabaseSQL("db", ""); got != "CREATE DATABASE IF NOT EXISTS `db`" {
		t.Errorf("CreateDatabaseSQL without a cluster: %s", got)
	}
}
