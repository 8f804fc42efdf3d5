package clickhouse

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ferry-cdc/ferry/internal/netdial"
	"github.com/ferry-cdc/ferry/internal/tlsfail"
)

// applyTLS sets up TLS from cfg.CAFile: a CA file turns TLS on (as
// ?secure=true in the DSN does) and is the only CA trusted. Without it a
// DSN's secure=true trusts the system's CAs, and skip_verify=true none.
func applyTLS(opts *ch.Options, cfg Config) error {
	if cfg.CAFile == "" {
		return nil
	}
	if opts.TLS != nil && opts.TLS.InsecureSkipVerify {
		return errors.New("clickhouse: skip_verify=true in the DSN and a CA file (--ch-ca-file) contradict each other: drop one")
	}
	pem, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return fmt.Errorf("clickhouse: read the CA file (--ch-ca-file) %s: %w", cfg.CAFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("clickhouse: the CA file (--ch-ca-file) %s holds no PEM certificate", cfg.CAFile)
	}
	if opts.TLS == nil {
		opts.TLS = &tls.Config{}
	}
	opts.TLS.RootCAs = pool
	opts.TLS.MinVersion = tls.VersionTLS12
	return nil
}

// setDialer makes the client dial through package netdial, whose TCP
// connections notice a server that vanished within about a minute, with
// TLS on top when the DSN asks for it (a dialer of one's own replaces the
// client's, TLS included).
func setDialer(opts *ch.Options) {
	timeout := opts.DialTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second // the client's default
	}
	d := netdial.Dialer(timeout, netdial.UserTimeout)
	if opts.TLS == nil {
		opts.DialContext = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
		return
	}
	td := &tls.Dialer{NetDialer: d, Config: opts.TLS}
	opts.DialContext = func(ctx context.Context, addr string) (net.Conn, error) { return td.DialContext(ctx, "tcp", addr) }
}

// IsTLSError reports whether err is a failure to set up TLS with the
// server (an untrusted or wrong certificate, TLS to a plain port).
func IsTLSError(err error) bool { return tlsfail.Is(err) }

// explainTLS turns a TLS failure of the connection to host into an error
// that says which setting to change; other errors it returns as they are.
func explainTLS(err error, host string, secure bool) error {
	hint := ""
	switch kind := tlsfail.Classify(err); {
	case kind == tlsfail.Untrusted:
		hint = fmt.Sprintf("ClickHouse TLS: the certificate of %s is not signed by a CA ferry trusts: "+
			"give the CA that signed it with --ch-ca-file (FERRY_CH_CA_FILE)", host)
	case kind == tlsfail.WrongHost:
		hint = fmt.Sprintf("ClickHouse TLS: the certificate of %s does not name that host: "+
			"connect with a name the certificate lists (in --ch), or set tls_server_name=<name> in --ch", host)
	case kind == tlsfail.Invalid:
		hint = fmt.Sprintf("ClickHouse TLS: the certificate of %s is not valid (expired, or not for a server)", host)
	case kind == tlsfail.NotTLS && secure:
		hint = fmt.Sprintf("ClickHouse TLS: %s does not speak TLS: with secure=true or --ch-ca-file, "+
			"--ch must name ClickHouse's secure native port (tcp_port_secure, 9440 by default), not the plain one", host)
	case !secure && isEOF(err):
		return fmt.Errorf("%w (if %s is ClickHouse's secure native port, add ?secure=true to --ch)", err, host)
	}
	if hint == "" {
		return err
	}
	return &tlsfail.Error{Hint: hint, Err: err}
}

func isEOF(err error) bool {
	return err != nil && (strings.HasSuffix(err.Error(), "EOF") || strings.Contains(err.Error(), "connection reset"))
}
