package clickhouse

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

func TestApplyTLS(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dsn, ca, want string
	}{
		{"clickhouse://h:9440?secure=true&skip_verify=true", notPEM, "contradict each other"},
		{"clickhouse://h:9440?secure=true", notPEM, "holds no PEM certificate"},
		{"clickhouse://h:9440", filepath.Join(dir, "none.pem"), "read the CA file (--ch-ca-file)"},
	} {
		opts, err := ch.ParseDSN(c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if err := applyTLS(opts, Config{CAFile: c.ca}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %s: %v, want an error saying %q", c.dsn, c.ca, err, c.want)
		}
	}
	opts, err := ch.ParseDSN("clickhouse://h:9000")
	if err != nil {
		t.Fatal(err)
	}
	if err := applyTLS(opts, Config{}); err != nil || opts.TLS != nil {
		t.Errorf("no CA file: TLS %v, err %v", opts.TLS, err)
	}
}

// TestTLSNotRetryable: a certificate problem is not a transient failure.
func TestTLSNotRetryable(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("dial: %w", x509.UnknownAuthorityError{}),
		fmt.Errorf("dial: %w", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "h"}),
		explainTLS(x509.UnknownAuthorityError{}, "h:9440", true),
	} {
		if IsRetryable(err) {
			t.Errorf("IsRetryable(%v) = true", err)
		}
	}
}
