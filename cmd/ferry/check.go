package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

type checkCmd struct {
	connFlags
	tableFlags
	JSON bool `name:"json" help:"Print the problems as JSON."`
}

// Run lists every problem found in PostgreSQL and ClickHouse, and fails if
// any would stop ferry run.
func (c *checkCmd) Run(ctx context.Context, log *zap.Logger) error {
	cfg := replicator.Config{ConnString: c.PG, Slot: c.Slot, Publication: c.Publication, Tables: c.Tables,
		AppendOnly: c.AppendOnly, TextColumns: c.TextColumns, NullAsDefault: c.Nullable == "default-values", NativeJSON: c.JSONType == "json",
		ExcludeColumns: c.ExcludeColumns, RowFilters: c.RowFilter, Logger: zap.NewNop()}
	var ps []replicator.Problem
	var info []string
	found, err := replicator.Check(ctx, cfg)
	if err != nil {
		fix := "check --pg (host, port, user, password, database) and that PostgreSQL accepts the connection (pg_hba.conf)"
		if replicator.IsTLSError(err) {
			fix = "fix the TLS settings of --pg as the detail says (sslmode, sslrootcert)"
		}
		ps = append(ps, replicator.Problem{Check: "postgresql", Blocking: true, Detail: err.Error(), Fix: fix})
	}
	ps = append(ps, found...)
	sink, err := openSink(ctx, c.connFlags, zap.NewNop(), sinkOptions{})
	if err != nil {
		fix := "check --ch: the native TCP port (9000), the user and the password"
		if clickhouse.IsTLSError(err) {
			fix = "fix the TLS settings as the detail says: --ch-ca-file, ?secure=true in --ch, and the secure native port (9440)"
		}
		ps = append(ps, replicator.Problem{Check: "clickhouse", Blocking: true, Detail: err.Error(), Fix: fix})
	} else {
		info = append(info, fmt.Sprintf("ClickHouse %s reachable, database %s", sink.ServerVersion(), sink.Database()))
		if err := replicator.CheckJSONType(c.JSONType == "json", sink.Capabilities(), "ClickHouse "+sink.ServerVersion()); err != nil {
			ps = append(ps, replicator.Problem{Check: "json-type", Blocking: true, Detail: err.Error(),
				Fix: "--json-type=string, or upgrade ClickHouse to 25.3 or later"})
		}
		sink.Close()
	}
	blocking := 0
	for _, p := range ps {
		if p.Blocking {
			blocking++
		}
	}
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"problems": ps, "info": info}); err != nil {
			return err
		}
	} else {
		for _, i := range info {
			fmt.Println("ok     ", i)
		}
		for _, p := range ps {
			level := "WARN   "
			if p.Blocking {
				level = "BLOCKS "
			}
			fmt.Printf("%s%s: %s\n       fix: %s\n", level, p.Check, p.Detail, p.Fix)
		}
		if len(ps) == 0 {
			fmt.Println("ok      no problem found")
		}
	}
	if blocking > 0 {
		return fmt.Errorf("check: %d problems block ferry run", blocking)
	}
	log.Debug("check passed", zap.Int("warnings", len(ps)))
	return nil
}
