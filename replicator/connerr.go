package replicator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// explainConnect puts in front of a failed connection's error what failed,
// in the user's terms (the address, the user, the database), and the likely
// fixes. TLS failures (explainTLS) and other errors are returned as they
// are. The hint never holds the password: only cfg's host, port, user and
// database.
func explainConnect(err error, cfg *pgconn.Config) error {
	if err == nil || IsTLSError(err) {
		return err
	}
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	reach := fmt.Sprintf("check the host and port in --pg (FERRY_PG_URL), that PostgreSQL runs on %s and listens on that address "+
		"(listen_addresses and port in postgresql.conf), and that no firewall is in the way", cfg.Host)
	var hint string
	var dns *net.DNSError
	var ne net.Error
	switch code := pgCode(err); {
	case code == "28P01":
		hint = fmt.Sprintf("PostgreSQL at %s refused the password of user %q: check the password "+
			"(in --pg, --pg-password-file, FERRY_PG_PASSWORD, PGPASSWORD or ~/.pgpass) and the user name", addr, cfg.User)
	case code == "28000":
		hint = fmt.Sprintf("PostgreSQL at %s refused user %q for database %q: check that the role exists and may log in, "+
			"and that a pg_hba.conf line lets it connect from this address", addr, cfg.User, cfg.Database)
	case code == "3D000":
		hint = fmt.Sprintf("PostgreSQL at %s has no database %q: check the database name at the end of --pg "+
			"(psql -l lists them)", addr, cfg.Database)
	case code != "":
		return err
	case errors.As(err, &dns):
		hint = fmt.Sprintf("cannot resolve PostgreSQL's host name %q: check the host in --pg (FERRY_PG_URL) and the DNS", cfg.Host)
	case errors.Is(err, syscall.ECONNREFUSED):
		hint = fmt.Sprintf("nothing listens at %s (connection refused): %s", addr, reach)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		hint = fmt.Sprintf("no answer from %s (timed out): %s", addr, reach)
	case errors.As(err, &ne):
		hint = fmt.Sprintf("cannot reach PostgreSQL at %s: %s", addr, reach)
	default:
		return err
	}
	return &connectError{hint: hint, err: err}
}

// connectError is a failed connection with the hint explainConnect gave.
type connectError struct {
	hint string
	err  error
}

func (e *connectError) Error() string { return e.hint + ": " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }
