package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ferry-cdc/ferry/replicator"
)

// chSecretFlags are ClickHouse's TLS and password settings; ferry run and
// ferry load share them.
type chSecretFlags struct {
	CHCAFile       string `name:"ch-ca-file" help:"PEM file of the CA that signed ClickHouse's certificate; turns TLS on, as ?secure=true in --ch does (the secure native port, 9440)." env:"FERRY_CH_CA_FILE" placeholder:"FILE"`
	CHPassword     string `name:"ch-password" help:"ClickHouse password, when not in --ch (prefer the env var or a file: a flag shows in ps)." env:"FERRY_CH_PASSWORD"`
	CHPasswordFile string `name:"ch-password-file" help:"File whose first line is the ClickHouse password." env:"FERRY_CH_PASSWORD_FILE" placeholder:"FILE"`
	// chPassword is the password from CHPassword or CHPasswordFile.
	chPassword string
}

// AfterApply reads the ClickHouse password from its flag or file.
func (c *chSecretFlags) AfterApply() error {
	pw, err := password("--ch-password", c.CHPassword, "--ch-password-file", c.CHPasswordFile)
	c.chPassword = pw
	return err
}

// AfterApply puts a PostgreSQL password given apart from --pg into the
// connection string, which every PostgreSQL connection is made from (and
// which is redacted wherever it is shown), and reads ClickHouse's.
func (c *connFlags) AfterApply() error {
	if err := c.chSecretFlags.AfterApply(); err != nil {
		return err
	}
	var err error
	c.PG, err = withPGPassword(c.PG, c.PGPassword, c.PGPasswordFile)
	return err
}

// withPGPassword returns the connection string with the password of
// --pg-password or --pg-password-file in it, if one is set.
func withPGPassword(connString, pw, file string) (string, error) {
	pw, err := password("--pg-password", pw, "--pg-password-file", file)
	if err != nil || pw == "" || connString == "" {
		return connString, err
	}
	return replicator.WithPassword(connString, pw)
}

// password returns the password of a flag or of a file flag, at most one
// of which may be set. The file's first line is the password, so a file
// ending in a newline works.
func password(flag, value, fileFlag, file string) (string, error) {
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("%s and %s are both set: give one", flag, fileFlag)
	case file == "":
		return value, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		// The path, not the content, is in the error.
		return "", fmt.Errorf("%s: %w", fileFlag, err)
	}
	pw, _, _ := strings.Cut(string(data), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", errors.New(fileFlag + ": " + file + " is empty: its first line must be the password")
	}
	return pw, nil
}
