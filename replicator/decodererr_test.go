package replicator

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestDecoderError: an internal error of the walsender's decoding ends the
// run (it is not retried as a lost connection would be) with a message
// naming the slot, the last confirmed position and the way out; other
// errors the walsender sends keep their plain form.
func TestDecoderError(t *testing.T) {
	r := &Replicator{}
	internal := &pgconn.PgError{Severity: "ERROR", Code: "XX000", Message: `could not map filenode "base/16384/16999" to relation OID`}
	err := decoderError("ferry_s", pglogrepl.LSN(0x16B3740), internal)
	for _, want := range []string{"slot ferry_s", "0/16B3740", "SELECT pg_drop_replication_slot('ferry_s')", "copies every table afresh", "could not map filenode"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "XX000" {
		t.Errorf("the server's error is not wrapped: %v", err)
	}
	if r.transient(err) {
		t.Errorf("an internal decoding error is retried: %v", err)
	}
	other := &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}
	if err := decoderError("ferry_s", 0, other); strings.Contains(err.Error(), "pg_drop_replication_slot") || !r.transient(err) {
		t.Errorf("a shutdown's error: %v (retried: %v), want the plain form, retried", err, r.transient(err))
	}
}
