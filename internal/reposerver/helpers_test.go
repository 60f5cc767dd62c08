package reposerver_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"testing"

	"github.com/coffer-backup/coffer/internal/reposerver/reposervertest"
	"github.com/coffer-backup/coffer/internal/store/remote/wire"
)

// commitSum is the commit trailer of body s.
func commitSum(s string) string {
	h := wire.NewCommitSum()
	h.Write([]byte(s))
	return wire.CommitValue(h)
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
