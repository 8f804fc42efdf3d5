package main

import (
	"context"
	"strings"
	"testing"
)

// TestTableShapes: the config file's table-shapes makes the ClickHouse
// table in the shape asked for (the key in another order, a partition key
// over it, settings, and on servers that have them a codec and a TTL), and
// the table then holds PostgreSQL's rows through updates and deletes that
// cross partitions. A shape that could not keep the rows is refused at
// start, naming the table, the key and the fix.
func TestTableShapes(t *testing.T) {
	e := newOpsEnv(t)
	e.exec(`CREATE TABLE orders (tenant int, id bigint, v text, created timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (tenant, id))`,
		`INSERT INTO orders SELECT g % 7, g, 'v' || g, now() - g * interval '1 day' FROM generate_series(1, 300) g`)
	modern := e.chVersionAtLeast(22)
	shape := `table-shapes:
  public.orders:
    order_by: [id, tenant]
    partition_by: tenant % 4
    settings: {index_granularity: 512}
`
	if modern {
		shape += `    codecs: {v: "ZSTD(3)"}
    ttl: _ferry_synced_at + INTERVAL 10 YEAR
`
	}
	cfg := writeConfig(t, shape)
	if out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "", "--config", cfg)...); err != nil {
		t.Fatalf("ferry run: %v\n%s", err, tail(out))
	}
	e.exec(`UPDATE orders SET v = 'moved', tenant = tenant + 1 WHERE id % 5 = 0`, // key changes, across partitions
		`UPDATE orders SET v = v || '!' WHERE id % 3 = 0`,
		`DELETE FROM orders WHERE id % 11 = 0`)
	if out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "", "--config", cfg)...); err != nil {
		t.Fatalf("ferry run: %v\n%s", err, tail(out))
	}
	full, sorting := e.chShape(e.name, "orders")
	wants := []string{"PARTITION BY", "index_granularity = 512"}
	if modern {
		wants = append(wants, "TTL _ferry_synced_at + toIntervalYear(10)")
	}
	for _, want := range wants {
		if !strings.Contains(full, want) {
			t.Errorf("engine_full %q lacks %q", full, want)
		}
	}
	if sorting != "id, tenant" {
		t.Errorf("sorting_key %q, want id, tenant", sorting)
	}
	if modern {
		if codec := e.chScalar("SELECT compression_codec FROM system.columns WHERE database = '" + e.name + "' AND table = 'orders' AND name = 'v'"); codec != "CODEC(ZSTD(3))" {
			t.Errorf("column v's codec is %q, want CODEC(ZSTD(3))", codec)
		}
	}
	pgSum := e.pgScalar(`SELECT count(*) || ' ' || sum(id * 10 + tenant) || ' ' || md5(string_agg(v, ',' ORDER BY id)) FROM orders`)
	chSum := e.chScalar("SELECT toString(count()) || ' ' || toString(sum(id * 10 + tenant)) || ' ' || lower(hex(MD5(arrayStringConcat(arrayMap(x -> ifNull(x.2, ''), arraySort(groupArray((id, v)))), ',')))) FROM " +
		e.name + ".orders FINAL WHERE _ferry_deleted = 0")
	if pgSum != chSum {
		t.Errorf("PostgreSQL holds %s, ClickHouse %s", pgSum, chSum)
	}
	if out, err := e.ferry(e.args("verify", "--config", cfg)...); err != nil {
		t.Errorf("ferry verify: %v\n%s", err, tail(out))
	}

	// A retype ferry carries out by copying the table again makes the new
	// table in the same shape.
	e.exec(`ALTER TABLE orders ALTER COLUMN v TYPE int USING length(v)`, `UPDATE orders SET v = v + 100 WHERE id = 1`)
	if out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "", "--config", cfg)...); err != nil || !strings.Contains(out, "schema change needs the ClickHouse table rebuilt") {
		t.Fatalf("ferry run after the retype: %v, want a rebuild\n%s", err, tail(out))
	}
	if full, sorting := e.chShape(e.name, "orders"); !strings.Contains(full, "PARTITION BY") || !strings.Contains(full, "index_granularity = 512") || sorting != "id, tenant" {
		t.Errorf("after the rebuild, engine_full %q, sorting_key %q: the shape is lost", full, sorting)
	}
	pgSum = e.pgScalar(`SELECT count(*) || ' ' || sum(v)::text FROM orders`)
	chSum = e.chScalar("SELECT toString(count()) || ' ' || toString(sum(v)) FROM " + e.name + ".orders FINAL WHERE _ferry_deleted = 0")
	if pgSum != chSum {
		t.Errorf("after the rebuild, PostgreSQL holds %s, ClickHouse %s", pgSum, chSum)
	}

	// Refused: a shape that would lose or double rows, and a table that is
	// not replicated.
	for _, c := range []struct{ shape, want string }{
		{"order_by: [id]", "order_by: [id] is not the key of public.orders in some order (its key is tenant, id)"},
		{"partition_by: region % 3", "change its partition_by to an expression of tenant, id only"},
	} {
		f := newOpsEnv(t)
		f.exec(`CREATE TABLE orders (tenant int, id bigint, region int NOT NULL DEFAULT 0, PRIMARY KEY (tenant, id))`,
			`INSERT INTO orders VALUES (1, 1)`)
		bad := writeConfig(t, "table-shapes:\n  public.orders:\n    "+c.shape+"\n")
		out, err := f.ferry(f.args("run", "--catch-up", "--metrics-addr", "", "--config", bad)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("ferry run with %s: %v, want a refusal saying %q:\n%s", c.shape, err, c.want, tail(out))
		}
		if tables := f.chTables(f.name); strings.Contains(strings.Join(tables, ","), "orders") {
			t.Errorf("with %s, ClickHouse tables %v: the refused table is left", c.shape, tables)
		}
	}
	out, err := e.ferry(e.args("run", "--catch-up", "--metrics-addr", "", "--config", writeConfig(t, "table-shapes:\n  public.ordres: {order_by: [id, tenant]}\n"))...)
	if err == nil || !strings.Contains(out, "names table public.ordres, which ferry does not replicate") {
		t.Errorf("ferry run with a misspelt table: %v\n%s", err, tail(out))
	}
}

func (e *opsEnv) chScalar(q string) string {
	e.t.Helper()
	conn, err := e.chConn()
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	var s string
	if err := conn.QueryRow(context.Background(), q).Scan(&s); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return s
}

func (e *opsEnv) pgScalar(q string) string {
	e.t.Helper()
	var s string
	if err := e.pg.QueryRow(context.Background(), q).Scan(&s); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return s
}

func (e *opsEnv) chShape(db, table string) (engineFull, sortingKey string) {
	e.t.Helper()
	conn, err := e.chConn()
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.QueryRow(context.Background(), "SELECT engine_full, sorting_key FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&engineFull, &sortingKey); err != nil {
		e.t.Fatal(err)
	}
	return engineFull, sortingKey
}

// chVersionAtLeast reports whether the env's ClickHouse is of that major
// version or later.
func (e *opsEnv) chVersionAtLeast(major int) bool {
	v := e.chScalar("SELECT version()")
	var m int
	for _, c := range v {
		if c < '0' || c > '9' {
			break
		}
		m = m*10 + int(c-'0')
	}
	return m >= major
}
