package main

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/replicator"
)

// setupCmd installs the event triggers that put every DDL command on a
// replicated table into the stream, in commit order with the data.
type setupCmd struct {
	PG          string `name:"pg" help:"PostgreSQL connection URL (a superuser: event triggers need one)." env:"FERRY_PG_URL" required:""`
	Publication string `help:"Publication that new tables of replicated schemas join." default:"ferry" env:"FERRY_PUBLICATION"`
}

func (c *setupCmd) Run(ctx context.Context, log *zap.Logger) error {
	if err := replicator.Setup(ctx, c.PG, c.Publication); err != nil {
		return err
	}
	fmt.Printf("installed ferry's DDL capture (event triggers %s and %s) for publication %s\n",
		replicator.DDLTrigger, replicator.DDLDropTrigger, c.Publication)
	return nil
}
