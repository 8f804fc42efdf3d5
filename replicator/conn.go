package replicator

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ferry-cdc/ferry/internal/netdial"
)

// setSessionParams fixes the settings that shape PostgreSQL's text output,
// so that what pgoutput and COPY send is exactly what package schema parses,
// whatever the server's or the role's defaults are.
func setSessionParams(params map[string]string) {
	params["DateStyle"] = "ISO"
	params["TimeZone"] = "UTC"
	params["IntervalStyle"] = "postgres"
	params["extra_float_digits"] = "3"
	params["bytea_output"] = "hex"
	if params["application_name"] == "" {
		params["application_name"] = "ferry"
	}
}

// setConnOptions prepares a connection's config: the session settings,
// and a dialer whose TCP connections notice a server that vanished within
// about a minute (package netdial). tcp_user_timeout in the URL, in
// milliseconds as libpq reads it (0 turns it off), replaces the minute.
func setConnOptions(cfg *pgconn.Config) error {
	setSessionParams(cfg.RuntimeParams)
	userTimeout := netdial.UserTimeout
	if v, ok := cfg.RuntimeParams["tcp_user_timeout"]; ok {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return fmt.Errorf("tcp_user_timeout=%q in the PostgreSQL URL: want milliseconds, such as 60000 (0 turns it off)", v)
		}
		userTimeout = time.Duration(ms) * time.Millisecond
		delete(cfg.RuntimeParams, "tcp_user_timeout") // libpq's, not a server setting
	}
	cfg.DialFunc = netdial.Dialer(cfg.ConnectTimeout, userTimeout).DialContext
	return nil
}

// connect opens a regular SQL connection; tune, when not nil, adjusts its
// config last.
func connect(ctx context.Context, connString string, tune ...func(*pgconn.Config)) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL URL %s: %w", Redact(connString), redactErr(err, connString))
	}
	if err := setConnOptions(&cfg.Config); err != nil {
		return nil, err
	}
	for _, f := range tune {
		f(&cfg.Config)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL %s: %w", Redact(connString), explainConnect(explainTLS(redactErr(err, connString), cfg.Host), &cfg.Config))
	}
	return conn, nil
}

// connectReplication opens a walsender connection for logical replication.
func connectReplication(ctx context.Context, connString string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL URL %s: %w", Redact(connString), redactErr(err, connString))
	}
	if err := setConnOptions(cfg); err != nil {
		return nil, err
	}
	cfg.RuntimeParams["replication"] = "database"
	bufferReads(cfg)
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open replication connection to %s: %w", Redact(connString), explainConnect(explainTLS(redactErr(err, connString), cfg.Host), cfg))
	}
	return conn, nil
}

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// Redact returns the connection string with its password replaced, for
// logs and errors. It accepts both URL and keyword/value forms.
func Redact(connString string) string {
	if u, err := url.Parse(connString); err == nil && u.Scheme != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return dsnPassword.ReplaceAllString(connString, "${1}xxxxx")
}

// redactErr keeps an error's chain but makes sure its text does not carry
// the password, should a driver ever quote the connection string.
func redactErr(err error, connString string) error {
	if err == nil {
		return nil
	}
	pw := passwordOf(connString)
	if pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), pw, "xxxxx"), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func passwordOf(connString string) string {
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return ""
	}
	return cfg.Password
}

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
