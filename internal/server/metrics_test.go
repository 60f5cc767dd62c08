package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestMetricsNeedSysAudit: /metrics answers Prometheus' text format to a
// token with Sys.Audit on /system (an auditor's, an admin's) and a
// problem to anyone else: the series name VMs, policies and repositories.
func TestMetricsNeedSysAudit(t *testing.T) {
	e := newEnv(t, "")
	get := func(token string) response {
		t.Helper()
		req, err := http.NewRequest("GET", e.http.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{status: res.StatusCode, header: res.Header, body: b}
	}
	get("").problem(t, http.StatusUnauthorized, api.Unauthenticated)
	get(e.tokens["backupop"]).problem(t, http.StatusForbidden, api.Denied)
	for _, who := range []string{"admin", "auditor"} {
		r := get(e.tokens[who])
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "coffer_") {
			t.Fatalf("%s: /metrics answered %d:\n%.300s", who, r.status, r.body)
		}
	}
}
