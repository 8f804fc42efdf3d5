package replicator

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestServerVersionGate: PostgreSQL before 13 is refused, and before 14
// ferry setup is refused and ferry run says the installed capture is inert
// (pgoutput sends logical decoding messages only from 14 on).
func TestServerVersionGate(t *testing.T) {
	for _, c := range []struct {
		major      int
		capture    bool
		runErr     string // what ferry run refuses with; "" when it runs
		runNote    string // what it says at start
		setupError string // what ferry setup refuses with
	}{
		{major: 12, runErr: "PostgreSQL 12 is not supported", setupError: "PostgreSQL 12 is not supported"},
		{major: 13, setupError: "needs PostgreSQL 14 or later"},
		{major: 13, capture: true, runNote: "inert on PostgreSQL 13", setupError: "needs PostgreSQL 14 or later"},
		{major: 14, capture: true},
		{major: 15},
		{major: 18, capture: true},
	} {
		note, err := checkServerVersion(c.major, c.capture)
		if !matches(err, c.runErr) {
			t.Errorf("run on %d (capture %v): error %v, want %q", c.major, c.capture, err, c.runErr)
		}
		if (c.runNote == "") != (note == "") || !strings.Contains(note, c.runNote) {
			t.Errorf("run on %d (capture %v): note %q, want %q", c.major, c.capture, note, c.runNote)
		}
		if err := checkSetupVersion(c.major); !matches(err, c.setupError) {
			t.Errorf("setup on %d: error %v, want %q", c.major, err, c.setupError)
		}
	}
}

func matches(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}

// TestServerVersionGateLive reads the local server's version the way Run
// and Setup do, and checks that the gate lets it through with capture.
func TestServerVersionGateLive(t *testing.T) {
	url := os.Getenv("FERRY_PG_URL")
	if url == "" {
		t.Skip("FERRY_PG_URL is not set: run `make stack-up` and `. .stack/env`")
	}
	conn, err := connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	major := serverMajor(conn.PgConn())
	if major < 14 {
		t.Skipf("the local server is PostgreSQL %d; this check needs 14 or later", major)
	}
	if note, err := checkServerVersion(major, true); err != nil || note != "" {
		t.Errorf("PostgreSQL %d with capture: note %q, error %v", major, note, err)
	}
	if err := checkSetupVersion(major); err != nil {
		t.Error(err)
	}
}
