package clickhouse

import (
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// precreate makes, as a user would before ferry's first start, a table of
// tbl's columns with the engine clause given, and returns its mapping.
func precreate(t *testing.T, s *Sink, tbl schema.Table, engine string) *schema.TableMap {
	t.Helper()
	tm, err := schema.Map(tbl, s.Capabilities())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ensureDatabase(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	ddl := tm.CreateTableDDL(s.db)
	ddl = ddl[:strings.Index(ddl, "\n) ENGINE = ")+2] + " ENGINE = " + engine
	if err := s.conn.Exec(ctxT(t), ddl); err != nil {
		t.Fatalf("%s: %v", ddl, err)
	}
	return tm
}

// TestPreexistingTableShape: a ClickHouse table made before ferry's first
// start, with the right columns, is taken when its engine and keys keep
// PostgreSQL's rows, and refused, naming the table, the cause and the fix,
// when they would double, merge or lose rows.
func TestPreexistingTableShape(t *testing.T) {
	s := testSink(t)
	for _, c := range []struct {
		name, engine string
		want         []string
	}{
		{"plain", "MergeTree ORDER BY id", []string{"engine MergeTree every update and delete would add a row"}},
		{"unversioned", "ReplacingMergeTree ORDER BY id", []string{"without the version column _ferry_version"}},
		{"wide_order", "ReplacingMergeTree(_ferry_version) ORDER BY (v_len, id)", []string{"has v_len beyond the key (id)"}},
		{"no_key", "ReplacingMergeTree(_ferry_version) ORDER BY tuple()", []string{"lacks id of the key (id)"}},
		{"by_sync_time", "ReplacingMergeTree(_ferry_version) PARTITION BY toYYYYMM(_ferry_synced_at) ORDER BY id",
			[]string{"PARTITION BY uses _ferry_synced_at, which is not in the key (id)"}},
	} {
		tbl := kvTable(c.name)
		if c.name == "wide_order" {
			tbl.Columns = append(tbl.Columns, schema.Column{Name: "v_len", TypeOID: oidInt4, TypeMod: -1, NotNull: true})
		}
		tm := precreate(t, s, tbl, c.engine)
		err := s.Prepare(ctxT(t), []*schema.TableMap{tm})
		if err == nil {
			t.Errorf("%s: Prepare took a table of ENGINE = %s", c.name, c.engine)
			continue
		}
		for _, want := range append(c.want, s.table(c.name), `"public"."`+c.name+`"`, "Drop it", "ReplacingMergeTree(`_ferry_version`) ORDER BY (`id`)") {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", c.name, err, want)
			}
		}
		if IsRetryable(err) {
			t.Errorf("%s: IsRetryable(%v) = true", c.name, err)
		}
	}

	// Taken: the key's columns in ORDER BY, a partition key over them,
	// settings of the user's own. Rows are replaced and deleted across
	// partitions as in a table ferry made.
	tm := precreate(t, s, kvTable("fits"),
		"ReplacingMergeTree(_ferry_version) PARTITION BY intDiv(id, 2) ORDER BY id SETTINGS index_granularity = 256")
	if err := s.Prepare(ctxT(t), []*schema.TableMap{tm}); err != nil {
		t.Fatalf("Prepare refused a table that fits: %v", err)
	}
	write(t, s, tm,
		loader.Row{Values: conv(t, tm, "1", "a", "1"), Version: 1},
		loader.Row{Values: conv(t, tm, "2", "b", "2"), Version: 1},
		loader.Row{Values: conv(t, tm, "3", "c", "3"), Version: 1})
	write(t, s, tm,
		loader.Row{Values: conv(t, tm, "1", "a2", "10"), Version: 5},
		deleted(tm, 6, conv(t, tm, "2", nil, nil)[0]),
		loader.Row{Values: conv(t, tm, "3", "old", "0"), Version: 0}) // a replay of an older change
	wantLive(t, s, tm, conv(t, tm, "1", "a2", "10"), conv(t, tm, "3", "c", "3"))
}

func TestShapeProblemParses(t *testing.T) {
	tm, err := schema.Map(schema.Table{Schema: "public", Name: "odd", Columns: []schema.Column{
		keyCol("a b", oidInt8), keyCol("id", oidInt8), col("v", oidText),
	}}, schema.Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		engine, full, sorting string
		partition             []string
		ok                    bool
	}{
		{"ReplicatedReplacingMergeTree", "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/d/odd_local', '{replica}', _ferry_version) ORDER BY (`a b`, id)", "`a b`, id", nil, true},
		{"ReplacingMergeTree", "ReplacingMergeTree(_ferry_version, _ferry_deleted) PARTITION BY intDiv(id, 100) ORDER BY (id, `a b`) SETTINGS index_granularity = 8192", "id, `a b`", []string{"id"}, true},
		{"SharedReplacingMergeTree", "SharedReplacingMergeTree('/p', 'r', `_ferry_version`) ORDER BY (id, `a b`)", "(id, `a b`)", nil, true},
		{"ReplacingMergeTree", "ReplacingMergeTree(_ferry_version, gone) ORDER BY (id, `a b`)", "id, `a b`", nil, false},
		{"ReplacingMergeTree", "ReplacingMergeTree(updated_at) ORDER BY (id, `a b`)", "id, `a b`", nil, false},
		{"ReplacingMergeTree", "ReplacingMergeTree(_ferry_version) ORDER BY (id, id)", "id, id", nil, false},
		{"ReplacingMergeTree", "ReplacingMergeTree(_ferry_version) ORDER BY (cityHash64(id), `a b`)", "cityHash64(id), `a b`", nil, false},
		{"CollapsingMergeTree", "CollapsingMergeTree(sign) ORDER BY (id, `a b`)", "id, `a b`", nil, false},
	} {
		why := shapeProblem(tm, c.engine, c.full, c.sorting, c.partition)
		if (why == "") != c.ok {
			t.Errorf("%s: shapeProblem = %q, want ok=%v", c.full, why, c.ok)
		}
	}
}
