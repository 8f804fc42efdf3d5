package replicator_test

import (
	"context"
	"math"
	"os/exec"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/ferry-cdc/ferry/schema"
)

// TestIdentifierTorture replicates schemas, tables and columns whose names
// hold quotes, backticks, backslashes, semicolons, newlines, spaces, unicode
// and reserved words: they must round-trip and run no SQL.
func TestIdentifierTorture(t *testing.T) {
	e := newEnv(t)
	sch := `we"ird sch;ema`
	tbl := "Täble`; DROP TABLE x; --\n(1)"
	cols := []string{"Key Col", "select", `a"b`, "`back`tick", "new\nline", "ünï côdé", `back\slash`, "'); DROP DATABASE default; --"}
	q := schema.QuotePG
	var defs, names []string
	for i, c := range cols {
		def := q(c) + " text"
		if i == 0 {
			def = q(c) + " int PRIMARY KEY"
		}
		defs = append(defs, def)
		names = append(names, q(c))
	}
	qt := q(sch) + "." + q(tbl)
	e.exec(`CREATE SCHEMA `+q(sch), `CREATE TABLE `+qt+` (`+strings.Join(defs, ", ")+`)`,
		`INSERT INTO `+qt+` SELECT g, 'v`+"`"+`'||g, E'\\'||g, '"'||g, E'\n', 'ü', NULL, ''')--' FROM generate_series(1, 50) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	e.exec(`UPDATE `+qt+` SET `+q("select")+` = 'updated' WHERE `+q("Key Col")+` % 2 = 0`,
		`UPDATE `+qt+` SET `+q("Key Col")+` = `+q("Key Col")+` + 1000 WHERE `+q("Key Col")+` <= 5`,
		`DELETE FROM `+qt+` WHERE `+q("Key Col")+` BETWEEN 20 AND 29`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)[sch+"."+tbl]; n != 40 {
		t.Errorf("%d rows, want 40", n)
	}
	chName := schema.CHTableName(sch, tbl)
	got := e.chStrings("SELECT name FROM system.tables WHERE database = '" + e.db + "' AND name = " + schema.QuoteCHString(chName))
	if len(got) != 1 {
		t.Errorf("ClickHouse table %q not found", chName)
	}
	if got := e.chStrings("SELECT name FROM system.databases WHERE name = 'default'"); len(got) != 1 {
		t.Error("the default database is gone")
	}
}

// TestVerifyCatchesDrift changes ClickHouse behind ferry's back and expects
// ferry verify to fail naming the table and the keys.
func TestVerifyCatchesDrift(t *testing.T) {
	e := newEnv(t)
	bin := buildFerry(t)
	e.exec(`CREATE TABLE accounts (id int PRIMARY KEY, balance numeric(12,2) NOT NULL)`,
		`INSERT INTO accounts SELECT g, g * 10 FROM generate_series(1, 1000) g`)
	e.mustCatchUp(e.config())
	args := []string{"verify", "--pg", e.pgURL, "--ch", e.chURL, "--slot", e.slot, "--log-level", "warn"}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("verify of an exact copy failed: %v\n%s", err, out)
	}
	// A newer version of row 7 with another balance, and row 8 deleted, in
	// ClickHouse only.
	// (INSERT ... VALUES through Exec hangs on ClickHouse 18.16: use a batch.)
	batch, err := e.ch.PrepareBatch(context.Background(), "INSERT INTO "+e.table("accounts")+" (id, balance, _ferry_version, _ferry_deleted)")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][]any{{int32(7), decimal.RequireFromString("1.23"), uint64(math.MaxUint64), uint8(0)},
		{int32(8), decimal.Zero, uint64(math.MaxUint64), uint8(1)}} {
		if err := batch.Append(r...); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	// And row 9 changed in PostgreSQL while nothing replicates.
	e.exec(`UPDATE accounts SET balance = 0 WHERE id = 9`)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("verify passed although ClickHouse differs:\n%s", out)
	}
	for _, want := range []string{"DIFFERS  public.accounts", `(id="7")`, `(id="8"): missing from ClickHouse`, `(id="9")`, `balance="1.23"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("verify output lacks %q:\n%s", want, out)
		}
	}
}

// TestPrivilegeErrors runs ferry as roles that lack what it needs and
// expects errors that name the fix.
func TestPrivilegeErrors(t *testing.T) {
	e := newEnv(t)
	role := "ferry_norepl_" + e.db[len(e.db)-8:]
	reader := "ferry_noselect_" + e.db[len(e.db)-8:]
	e.exec(`CREATE TABLE secret (id int PRIMARY KEY)`)
	e.adminExec(`CREATE ROLE `+role+` LOGIN`, `CREATE ROLE `+reader+` LOGIN REPLICATION`)
	t.Cleanup(func() { e.adminExec(`DROP ROLE IF EXISTS `+role, `DROP ROLE IF EXISTS `+reader) })
	for _, c := range []struct{ user, want, check, checkWant string }{
		{role, `ALTER ROLE "` + role + `" REPLICATION`, "privileges", `ALTER ROLE "` + role + `" REPLICATION`},
		{reader, `GRANT SELECT ON "public"."secret" TO "` + reader + `"`, "privileges", `GRANT SELECT ON "public"."secret"`},
	} {
		cfg := e.config()
		cfg.ConnString = asRole(t, e.pgURL, c.user)
		err := e.catchUp(cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("as %s: got %v, want an error containing %q", c.user, err, c.want)
		}
		checkBlocks(t, cfg, c.check, c.checkWant)
	}
}
