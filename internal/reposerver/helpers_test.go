package reposerver_test

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net/http"
	"os"
	"testing"

	"github.com/coffer-backup/coffer/internal/reposerver/reposervertest"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// client is a raw HTTPS client trusting the test server, for requests
// the store client would never send.
func client(t *testing.T, srv *reposervertest.Server) *http.Client {
	pem, err := os.ReadFile(srv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
