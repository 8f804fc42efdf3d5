package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
)

// redactor keeps a DSN's password out of messages.
type redactor struct {
	raw      string // the DSN as given
	password string // its password, "" when none
}

func newRedactor(dsn string) redactor {
	r := redactor{raw: dsn}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		r.password, _ = u.User.Password()
	}
	return r
}

// dsn is the DSN with its password replaced.
func (r redactor) dsn() string {
	u, err := url.Parse(r.raw)
	if err != nil {
		return "(unparsable DSN)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") || strings.Contains(strings.ToLower(k), "secret") {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return r.scrub(u.String())
}

// scrub removes the password from s.
func (r redactor) scrub(s string) string {
	if r.password == "" {
		return s
	}
	s = strings.ReplaceAll(s, r.password, "xxxxx")
	return strings.ReplaceAll(s, url.QueryEscape(r.password), "xxxxx")
}

// wrap wraps err with the context format says, and scrubs the password from
// the message while keeping err reachable for errors.Is and errors.As.
func (r redactor) wrap(err error, format string, args ...any) error {
	e := fmt.Errorf(format+": %w", append(args, err)...)
	msg := r.scrub(e.Error())
	if msg == e.Error() {
		return e
	}
	return &redactedError{msg: msg, err: e}
}

// redactedError is an error whose message had a password removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// rejectedError marks a batch that ClickHouse (or the sink, before sending
// it) refused for its content: sending it again fails again.
type rejectedError struct{ err error }

func (e *rejectedError) Error() string { return e.err.Error() }
func (e *rejectedError) Unwrap() error { return e.err }

// reject marks err as not retryable.
func reject(err error) error { return &rejectedError{err: err} }

// transientCodes are ClickHouse error codes that go away by themselves.
var transientCodes = map[int32]bool{
	3:   true, // UNEXPECTED_END_OF_FILE
	159: true, // TIMEOUT_EXCEEDED
	160: true, // TOO_SLOW
	164: true, // READONLY (a replica restarting)
	173: true, // CANNOT_ALLOCATE_MEMORY
	201: true, // QUOTA_EXCEEDED
	202: true, // TOO_MANY_SIMULTANEOUS_QUERIES
	203: true, // NO_FREE_CONNECTION
	209: true, // SOCKET_TIMEOUT
	210: true, // NETWORK_ERROR
	236: true, // ABORTED
	241: true, // MEMORY_LIMIT_EXCEEDED
	242: true, // TABLE_IS_READ_ONLY
	252: true, // TOO_MANY_PARTS
	285: true, // TOO_FEW_LIVE_REPLICAS
	319: true, // UNKNOWN_STATUS_OF_INSERT
	394: true, // QUERY_WAS_CANCELLED
	425: true, // SYSTEM_ERROR
	439: true, // CANNOT_SCHEDULE_TASK
	999: true, // KEEPER_EXCEPTION
}

// IsRetryable reports whether err, from any method of Sink, is a transient
// failure worth retrying: the connection was refused, reset or closed, an
// operation timed out, or the server is temporarily unable (too many parts,
// memory limit, ...). A batch rejected for its content (a value that does
// not fit its column, a missing Unchanged value, a table that does not match
// its mapping) is not retryable, nor is a cancelled context.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var rej *rejectedError
	var te *tlsError
	if errors.As(err, &rej) || errors.As(err, &te) || errors.As(explainTLS(err, "", true), &te) {
		return false
	}
	var ex *proto.Exception
	if errors.As(err, &ex) {
		return transientCodes[ex.Code]
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ch.ErrBatchInvalid) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ch.ErrAcquireConnTimeout) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}
