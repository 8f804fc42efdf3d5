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
	PG             string `name:"pg" help:"PostgreSQL connection URL (a superuser: event triggers need one)." env:"FERRY_PG_URL" required:""`
	PGPassword     string `name:"pg-password" help:"PostgreSQL password, when not in --pg (prefer the env var or a file: a flag shows in ps)." env:"FERRY_PG_PASSWORD"`
	PGPasswordFile string `name:"pg-password-file" help:"File whose first line is the PostgreSQL password." env:"FERRY_PG_PASSWORD_FILE" placeholder:"FILE"`
	Publication    string `help:"Publication that new tables of replicated schemas join." default:"ferry" env:"FERRY_PUBLICATION"`
}

// AfterApply puts a password given apart from --pg into it.
func (c *setupCmd) AfterApply() error {
	var err error
	c.PG, err = withPGPassword(c.PG, c.PGPassword, c.PGPasswordFile)
	return err
}

func (c *setupCmd) Run(ctx context.Context, log *zap.Logger) error {
	if err := replicator.Setup(ctx, c.PG, c.Publication); err != nil {
		return err
	}
	fmt.Printf("installed ferry's DDL capture (event triggers %s and %s) for publication %s\n",
		replicator.DDLTrigger, replicator.DDLDropTrigger, c.Publication)
	return nil
}
