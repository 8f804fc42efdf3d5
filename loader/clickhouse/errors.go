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
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"

	"github.com/ferry-cdc/ferry/internal/tlsfail"
	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
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
	32:  true, // ATTEMPT_TO_READ_AFTER_EOF (a Distributed insert whose shard's connection closed, e.g. a replica restarting)
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
	279: true, // ALL_CONNECTION_TRIES_FAILED (a Distributed insert whose shard has no replica up)
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
	var te *tlsfail.Error
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

// maxProbes bounds the inserts explainRejected makes: 2^20 rows.
const maxProbes = 20

// explainRejected turns the server's rejection of a whole batch (err, from
// insert) into one that names the first row the server rejects, which
// ClickHouse's message does not: it inserts ever shorter prefixes of the
// batch until it finds the shortest one that fails. The prefixes that
// succeed are rows the batch would have written anyway, and their versions
// make writing them again harmless. Any other error, or one that a probe
// does not reproduce, is returned as it is, as is a rejection of every
// row alike (a table that no longer takes ferry's rows at all).
func (s *Sink) explainRejected(ctx context.Context, tm *schema.TableMap, rows []loader.Row, err error) error {
	var ex *proto.Exception
	var rej *rejectedError
	if !errors.As(err, &rej) || !errors.As(err, &ex) {
		return err
	}
	lo, hi := 0, len(rows) // rows[:lo] is stored, rows[:hi] is rejected
	for probes := 0; hi-lo > 1 && probes < maxProbes; probes++ {
		mid := (lo + hi) / 2
		perr := s.insert(ctx, tm, rows[:mid])
		switch {
		case perr == nil:
			lo = mid
		case errors.As(perr, &rej) && errors.As(perr, &ex):
			hi = mid
		default:
			return err
		}
	}
	if hi-lo > 1 {
		return err
	}
	if lo == 0 && len(rows) > 1 && s.insert(ctx, tm, rows[1:2]) != nil {
		return err // not the first row alone: the table, or every row
	}
	i := hi - 1
	return reject(fmt.Errorf("clickhouse: ClickHouse rejects the row with key %s of %s (row %d of a batch of %d, version %d); "+
		"fix the ClickHouse table or the value in PostgreSQL, then start ferry again: %w",
		rowKey(tm, rows[i], i), s.table(tm.Name), i, len(rows), rows[i].Version, err))
}

// checkInsertTypes compares the column types the server announces for an
// INSERT with the mapping's. A column whose type was changed behind
// ferry's back would otherwise take the values the driver can convert,
// silently narrowed (an Int32 into a UInt16 column wraps), until ferry's
// next start noticed the difference.
func checkInsertTypes(name string, tm *schema.TableMap, got []column.Interface, rows []loader.Row) error {
	for j := range tm.Columns {
		if j >= len(got) {
			break
		}
		have, want := string(got[j].Type()), tm.Columns[j].Type
		if normType(have) == normType(want) {
			continue
		}
		return reject(fmt.Errorf("clickhouse: insert into %s: column %q is %s on the server but %s in ferry's mapping of %s "+
			"(first row of the batch: key %s): the ClickHouse table was changed behind ferry's back; "+
			"change the column back (ALTER TABLE %s MODIFY COLUMN %s %s), or drop the table to have ferry copy it anew",
			name, tm.Columns[j].Name, have, want, tm.Source.QualifiedName(), rowKey(tm, rows[0], 0),
			name, schema.QuoteCH(tm.Columns[j].Name), want))
	}
	return nil
}
