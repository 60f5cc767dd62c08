package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/internal/fingerprint"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// TLS is on by default: the server serves HTTPS with the certificate and
// key it is configured with, or else with a self-signed certificate it
// makes at its first start (ECDSA P-256) and keeps in its state
// directory. Clients trust that one by its SHA-256 fingerprint, which the
// server prints when it starts.

// Certificate files of the self-signed certificate, in the server's
// state directory.
const (
	selfSignedCert = "tls.crt"
	selfSignedKey  = "tls.key"
)

// selfSignedLifetime: a pinned certificate is trusted by its fingerprint,
// not its dates, so it lives long; replace it by deleting the files.
const selfSignedLifetime = 10 * 365 * 24 * time.Hour

// Certificate is the server's TLS certificate and how it came to be.
type Certificate struct {
	tls.Certificate
	// Fingerprint is the SHA-256 of the leaf certificate (what clients
	// pin), as fingerprint.Format writes it.
	Fingerprint string
	// Created says a self-signed certificate was made now; CertFile is
	// where the certificate is.
	Created  bool
	CertFile string
}

// LoadCertificate loads certFile and keyFile when given, else the
// self-signed certificate in dir, made first when it does not exist yet
// with hosts (and localhost, 127.0.0.1 and ::1) as its names.
func LoadCertificate(certFile, keyFile, dir string, hosts []string) (*Certificate, error) {
	created := false
	if certFile == "" {
		certFile, keyFile = filepath.Join(dir, selfSignedCert), filepath.Join(dir, selfSignedKey)
		if _, err := os.Stat(certFile); errors.Is(err, fs.ErrNotExist) {
			if err := makeSelfSigned(certFile, keyFile, hosts); err != nil {
				return nil, fmt.Errorf("self-signed certificate: %w", err)
			}
			created = true
		}
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return &Certificate{Certificate: c, Fingerprint: fingerprint.Format(c.Certificate[0]), Created: created, CertFile: certFile}, nil
}

// makeSelfSigned writes a new key (0600) and certificate for hosts.
func makeSelfSigned(certFile, keyFile string, hosts []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "coffer server", Organization: []string{"coffer"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(selfSignedLifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	seen := map[string]bool{}
	for _, h := range append(hosts, "localhost", "127.0.0.1", "::1") {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	// The key first: a certificate without its key would be kept and
	// never work.
	if err := statefile.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return statefile.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
