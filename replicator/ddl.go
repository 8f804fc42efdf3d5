package replicator

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Names of the DDL capture ferry setup installs (ferry teardown drops them).
const (
	DDLTrigger     = "ferry_ddl"      // event trigger on ddl_command_end
	DDLDropTrigger = "ferry_ddl_drop" // event trigger on sql_drop
	DDLFunction    = "ferry_ddl_capture"
	ddlPrefix      = "ferry.ddl"
)

// ddlEvent is what the trigger emits for each command on a table: the
// command and, except for DROP TABLE, the table as the catalog describes it
// right after the command (the tableJSON document).
type ddlEvent struct {
	Tag   string       `json:"tag"`
	Table catalogTable `json:"table"`
}

// ddlFunctionSQL is the trigger function. It runs inside the user's DDL
// transaction, so its message arrives in commit order with the data, and
// it must never make that DDL fail: every error becomes a warning. A new
// table of a schema the publication already replicates joins the
// publication when it has a replica identity (publishing the UPDATEs of a
// table without one would make PostgreSQL reject them).
func ddlFunctionSQL(publication string) string {
	pub := quoteLiteral(publication)
	return `CREATE OR REPLACE FUNCTION public.` + DDLFunction + `() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $ferry$
DECLARE
	cmd record;
	doc jsonb;
BEGIN
	IF TG_EVENT = 'sql_drop' THEN
		FOR cmd IN SELECT * FROM pg_event_trigger_dropped_objects() WHERE object_type = 'table' AND original LOOP
			PERFORM pg_logical_emit_message(true, '` + ddlPrefix + `', jsonb_build_object('tag', 'DROP TABLE',
				'table', jsonb_build_object('oid', cmd.objid::bigint, 'schema', cmd.schema_name, 'name', cmd.object_name))::text);
		END LOOP;
		RETURN;
	END IF;
	FOR cmd IN SELECT DISTINCT objid, command_tag FROM pg_event_trigger_ddl_commands()
		WHERE object_type IN ('table', 'table column') AND classid = 'pg_class'::regclass LOOP
		BEGIN
			SELECT ` + tableJSON + ` INTO doc
				FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE c.oid = cmd.objid AND c.relkind IN ('r', 'p');
			CONTINUE WHEN doc IS NULL;
			IF cmd.command_tag = 'CREATE TABLE' THEN
				PERFORM public.` + DDLFunction + `_publish(cmd.objid, ` + pub + `);
			END IF;
			PERFORM pg_logical_emit_message(true, '` + ddlPrefix + `', jsonb_build_object('tag', cmd.command_tag, 'table', doc)::text);
		EXCEPTION WHEN OTHERS THEN
			RAISE WARNING 'ferry: could not capture DDL on %: %', cmd.objid::regclass, SQLERRM;
		END;
	END LOOP;
END
$ferry$`
}

// publishFunctionSQL adds a new table to the publication when the
// publication already has a table of its schema and the table can be
// published safely.
func publishFunctionSQL() string {
	return `CREATE OR REPLACE FUNCTION public.` + DDLFunction + `_publish(rel oid, pub text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $ferry$
DECLARE
	r record;
BEGIN
	SELECT c.oid, n.nspname, c.relname, c.relreplident, c.relispartition,
		EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary) AS has_pk
		INTO r FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = rel;
	IF r.relispartition OR NOT EXISTS (SELECT 1 FROM pg_publication p WHERE p.pubname = pub)
		OR EXISTS (SELECT 1 FROM pg_publication p WHERE p.pubname = pub AND p.puballtables)
		OR NOT EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = pub AND t.schemaname = r.nspname) THEN
		RETURN;
	END IF;
	IF r.relreplident = 'f' OR (r.relreplident IN ('d', 'i') AND r.has_pk) THEN
		EXECUTE format('ALTER PUBLICATION %I ADD TABLE %I.%I', pub, r.nspname, r.relname);
	ELSE
		RAISE WARNING 'ferry: table %.% has no primary key, so it was not added to publication %: publishing its UPDATEs and DELETEs would make PostgreSQL reject them. Add a primary key, then ALTER PUBLICATION % ADD TABLE %.%',
			r.nspname, r.relname, pub, pub, r.nspname, r.relname;
	END IF;
END
$ferry$`
}

// Setup installs ferry's DDL capture for a publication: the trigger
// function and its event triggers. It needs a superuser and is idempotent.
func Setup(ctx context.Context, connString, publication string) error {
	conn, err := connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := checkSetupVersion(serverMajor(conn.PgConn())); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	stmts := []string{
		publishFunctionSQL(),
		ddlFunctionSQL(publication),
		"DROP EVENT TRIGGER IF EXISTS " + DDLTrigger,
		"CREATE EVENT TRIGGER " + DDLTrigger + " ON ddl_command_end WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE TABLE AS', 'SELECT INTO') EXECUTE FUNCTION public." + DDLFunction + "()",
		"DROP EVENT TRIGGER IF EXISTS " + DDLDropTrigger,
		"CREATE EVENT TRIGGER " + DDLDropTrigger + " ON sql_drop WHEN TAG IN ('DROP TABLE') EXECUTE FUNCTION public." + DDLFunction + "()",
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	defer tx.Rollback(context.Background())
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			if pgCode(err) == "42501" {
				return fmt.Errorf("setup: %w: event triggers need a superuser: run ferry setup as one", err)
			}
			return fmt.Errorf("setup: %s: %w", firstLine(s), err)
		}
	}
	return tx.Commit(ctx)
}

// hasDDLCapture reports whether ferry setup's triggers are installed.
func hasDDLCapture(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_event_trigger WHERE evtname IN ($1, $2) AND evtenabled <> 'D'`, DDLTrigger, DDLDropTrigger).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up ferry's DDL triggers: %w", err)
	}
	return n == 2, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
