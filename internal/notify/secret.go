package notify

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// readSecret reads a password or key from its file: the whole file less
// one trailing newline. Errors name the file, never its content.
func readSecret(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w (the file must exist and be readable by coffer)", what, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", what, path)
	}
	return s, nil
}

// tlsConfig verifies servers against the system's CAs plus those of
// caFile (PEM), when one is given.
func tlsConfig(serverName, caFile string) (*tls.Config, error) {
	c := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca-file %s holds no PEM certificate", caFile)
	}
	c.RootCAs = pool
	return c, nil
}

// permanentError is a refusal that retrying will not change (a receiver
// that answers 4xx, a mail server that rejects the sender): the delivery
// fails at once and the operator fixes the target, then retries it.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// isPermanent: refusals, and certificates that do not verify (a wrong
// ca-file or host name is the operator's to fix; retrying cannot help).
func isPermanent(err error) bool {
	var p permanentError
	var v *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var h x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &p) || errors.As(err, &v) || errors.As(err, &ua) || errors.As(err, &h) || errors.As(err, &ci)
}
