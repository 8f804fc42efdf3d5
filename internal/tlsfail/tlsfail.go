// Package tlsfail tells the kinds of TLS setup failure apart, for the
// PostgreSQL and ClickHouse connections to explain each with the setting
// of their own that mends it.
package tlsfail

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// Error is a TLS setup failure that another attempt would repeat, with a
// hint that names the setting to change.
type Error struct {
	Hint string
	Err  error
}

func (e *Error) Error() string { return e.Hint + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether err is, or wraps, an *Error.
func Is(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// Kind is what went wrong in a TLS handshake.
type Kind int

const (
	None      Kind = iota // not a certificate or handshake failure
	Untrusted             // the certificate is not signed by a trusted CA
	WrongHost             // the certificate does not name the host
	Invalid               // expired, not for a server, or otherwise unverifiable
	NotTLS                // the server answered something other than TLS
)

// Classify says which Kind of failure err is.
func Classify(err error) Kind {
	var unknown x509.UnknownAuthorityError
	var name x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return Untrusted
	case errors.As(err, &name):
		return WrongHost
	case errors.As(err, &invalid), errors.As(err, &verify):
		return Invalid
	case errors.As(err, &header):
		return NotTLS
	}
	return None
}
