package replicator

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// TLS to PostgreSQL is libpq's: sslmode (disable, allow, prefer, require,
// verify-ca, verify-full), sslrootcert, sslcert and sslkey in the URL, or
// the PGSSLMODE, PGSSLROOTCERT, ... environment variables. pgx reads them
// for the SQL and the replication connections alike.

// tlsError is a TLS failure that another attempt would repeat: the
// certificate is not trusted or not the host's, or the server refuses TLS.
type tlsError struct {
	hint string
	err  error
}

func (e *tlsError) Error() string { return e.hint + ": " + e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }

// IsTLSError reports whether err is a TLS setup failure of the connection
// to PostgreSQL, which retrying does not mend.
func IsTLSError(err error) bool {
	var te *tlsError
	return errors.As(err, &te)
}

// explainTLS says which setting to change when err is a TLS failure of a
// connection to host; other errors it returns as they are.
func explainTLS(err error, host string) error {
	var unknown x509.UnknownAuthorityError
	var name x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		return &tlsError{err: err, hint: "PostgreSQL TLS: the server's certificate is not signed by a CA ferry trusts: " +
			"set sslrootcert=<the CA's PEM file> in --pg (or PGSSLROOTCERT) to the CA that signed it"}
	case errors.As(err, &name):
		return &tlsError{err: err, hint: fmt.Sprintf("PostgreSQL TLS: the server's certificate does not name host %s, and sslmode=verify-full checks that: "+
			"connect with a name the certificate lists, or use sslmode=verify-ca", host)}
	case errors.As(err, &invalid), errors.As(err, &verify):
		return &tlsError{err: err, hint: "PostgreSQL TLS: the server's certificate is not valid (expired, or not for a server): check it, and sslrootcert in --pg"}
	case err != nil && strings.Contains(err.Error(), "server refused TLS connection"):
		return &tlsError{err: err, hint: "PostgreSQL TLS: the server does not accept TLS (ssl = off in postgresql.conf): turn ssl on, or lower sslmode in --pg"}
	}
	return err
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
