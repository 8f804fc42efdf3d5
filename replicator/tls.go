package replicator

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ferry-cdc/ferry/internal/tlsfail"
)

// TLS to PostgreSQL is libpq's: sslmode (disable, allow, prefer, require,
// verify-ca, verify-full), sslrootcert, sslcert and sslkey in the URL, or
// the PGSSLMODE, PGSSLROOTCERT, ... environment variables. pgx reads them
// for the SQL and the replication connections alike.

// IsTLSError reports whether err is a TLS setup failure of the connection
// to PostgreSQL, which retrying does not mend.
func IsTLSError(err error) bool { return tlsfail.Is(err) }

// explainTLS says which setting to change when err is a TLS failure of a
// connection to host; other errors it returns as they are.
func explainTLS(err error, host string) error {
	hint := ""
	switch tlsfail.Classify(err) {
	case tlsfail.Untrusted:
		hint = "PostgreSQL TLS: the server's certificate is not signed by a CA ferry trusts: " +
			"set sslrootcert=<the CA's PEM file> in --pg (or PGSSLROOTCERT) to the CA that signed it"
	case tlsfail.WrongHost:
		hint = fmt.Sprintf("PostgreSQL TLS: the server's certificate does not name host %s, and sslmode=verify-full checks that: "+
			"connect with a name the certificate lists, or use sslmode=verify-ca", host)
	case tlsfail.Invalid:
		hint = "PostgreSQL TLS: the server's certificate is not valid (expired, or not for a server): check it, and sslrootcert in --pg"
	default:
		if err != nil && strings.Contains(err.Error(), "server refused TLS connection") {
			hint = "PostgreSQL TLS: the server does not accept TLS (ssl = off in postgresql.conf): turn ssl on, or lower sslmode in --pg"
		}
	}
	if hint == "" {
		return err
	}
	return &tlsfail.Error{Hint: hint, Err: err}
}

// WithPassword returns connString with password set, for a password that
// comes apart from the URL (a file, an environment variable). A
// connection string that has a password already is an error: one of the
// two would be ignored.
func WithPassword(connString, password string) (string, error) {
	if hasPassword(connString) {
		return "", fmt.Errorf("--pg %s has a password and one is given apart (--pg-password-file or FERRY_PG_PASSWORD): give one", Redact(connString))
	}
	if u, err := url.Parse(connString); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		user := ""
		if u.User != nil {
			user = u.User.Username()
		}
		u.User = url.UserPassword(user, password)
		return u.String(), nil
	}
	if _, err := pgconn.ParseConfig(connString); err != nil {
		return "", fmt.Errorf("parse PostgreSQL connection string %s: %w", Redact(connString), redactErr(err, connString))
	}
	quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password)
	return strings.TrimSpace(connString) + " password='" + quoted + "'", nil
}

// hasPassword reports whether the connection string itself carries a
// password (not the environment or a password file).
func hasPassword(connString string) bool {
	if u, err := url.Parse(connString); err == nil && u.Scheme != "" {
		_, inUser := u.User.Password()
		return inUser || u.Query().Has("password")
	}
	return dsnPassword.MatchString(connString)
}
