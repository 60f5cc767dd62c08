package server

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// TestConfigObjectsThroughTheAPI: a policy editor creates, reads, changes
// and deletes a policy through the routes of the configuration objects:
// its version is the ETag, a change on a stale one is refused with 412
// and changes nothing, each change is audited once (by the service, in
// its transaction, not again by the server), and the file's own policy
// cannot be changed. Who may see and change each kind follows its
// privileges: the editor lists policies but cannot create a connection,
// the backup operator cannot change a policy, a tenant lists none, and
// the configuration in effect is the auditor's to read.
func TestConfigObjectsThroughTheAPI(t *testing.T) {
	e := newEnv(t, "")
	editor := e.tokens["editor"]
	spec := map[string]any{"name": "weekly", "connection": "lab", "schedule": "@weekly", "retention": map[string]any{"keep-last": 2}}

	r := e.do(editor, "POST", "/policies", spec)
	if r.status != http.StatusCreated || r.header.Get("Location") != "/policies/weekly" {
		t.Fatalf("create: %d %v %s", r.status, r.header, r.body)
	}
	var created api.ConfigObject
	r.json(t, &created)
	etag := r.header.Get("ETag")
	if created.Source != "catalog" || created.CreatedBy != "editor" || etag != strconv.Quote(strconv.FormatInt(created.Version, 10)) {
		t.Fatalf("created %+v with ETag %q", created, etag)
	}
	r = e.do(e.tokens["auditor"], "GET", "/policies/weekly", nil)
	if r.status != http.StatusOK || r.header.Get("ETag") != etag {
		t.Fatalf("get: %d ETag %q, want %s: %s", r.status, r.header.Get("ETag"), etag, r.body)
	}

	// A change on a version that is not the object's is refused, and
	// changes nothing; on the current one it goes through.
	spec["schedule"] = "@daily"
	stale := strconv.Quote(strconv.FormatInt(created.Version+7, 10))
	e.doWith(editor, "PUT", "/policies/weekly", spec, http.Header{"If-Match": {stale}}).problem(t, http.StatusPreconditionFailed, api.Conflict)
	e.doWith(editor, "PUT", "/policies/weekly", spec, http.Header{"If-Match": {"yesterday"}}).problem(t, http.StatusBadRequest, api.Invalid)
	e.do(e.tokens["backupop"], "PUT", "/policies/weekly", spec).problem(t, http.StatusForbidden, api.Denied)
	r = e.doWith(editor, "PUT", "/policies/weekly", spec, http.Header{"If-Match": {etag}})
	var updated api.ConfigObject
	r.json(t, &updated)
	if r.status != http.StatusOK || updated.Version <= created.Version || updated.Spec["schedule"] != "@daily" ||
		r.header.Get("ETag") == etag {
		t.Fatalf("update: %d %+v ETag %q", r.status, updated, r.header.Get("ETag"))
	}

	// The file's policy is the file's.
	e.do(e.tokens["admin"], "PUT", "/policies/nightly", map[string]any{"name": "nightly", "connection": "lab"}).
		problem(t, http.StatusConflict, api.Conflict)

	var listed []api.ConfigObject
	e.do(editor, "GET", "/policies", nil).json(t, &listed)
	if len(listed) != 2 || listed[0].Name != "nightly" || listed[0].Source != "file" || listed[1].Name != "weekly" {
		t.Fatalf("list: %+v", listed)
	}
	e.do(e.tokens[tenant], "GET", "/policies", nil).problem(t, http.StatusForbidden, api.Denied)
	e.do(editor, "POST", "/connections", map[string]any{"name": "lab2", "kind": "fake"}).problem(t, http.StatusForbidden, api.Denied)
	var eff api.EffectiveConfig
	if r := e.do(e.tokens["auditor"], "GET", "/config/effective", nil); r.status != http.StatusOK {
		t.Fatalf("effective configuration as the auditor: %d %s", r.status, r.body)
	} else if r.json(t, &eff); len(eff.Objects) != 3 { // lab, nightly, weekly
		t.Fatalf("effective configuration: %+v", eff.Objects)
	}
	e.do(editor, "GET", "/config/effective", nil).problem(t, http.StatusForbidden, api.Denied)

	// A draft is previewed without being stored.
	var preview api.PolicyPreview
	if r := e.do(editor, "POST", "/policies/preview?runs=2", map[string]any{"name": "draft", "connection": "lab", "schedule": "@hourly"}); r.status != http.StatusOK {
		t.Fatalf("draft preview: %d %s", r.status, r.body)
	} else if r.json(t, &preview); len(preview.NextRuns) != 2 || len(preview.Selected) != 1 || preview.Selected[0].VMsTotal != 2 {
		t.Fatalf("draft preview: %+v", preview)
	}

	e.doWith(editor, "DELETE", "/policies/weekly", nil, http.Header{"If-Match": {etag}}).problem(t, http.StatusPreconditionFailed, api.Conflict)
	if r := e.do(editor, "DELETE", "/policies/weekly", nil); r.status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	e.do(editor, "GET", "/policies/weekly", nil).problem(t, http.StatusNotFound, api.NotFound)

	// One record per change, refusals included, none twice.
	count := map[string]int{}
	for _, rec := range e.audit() {
		if rec.Object == "/policies/weekly" {
			count[rec.Operation+" "+rec.Result]++
		}
	}
	want := map[string]int{"create-policy " + catalog.AuditOK: 1, "update-policy " + catalog.AuditOK: 1, "update-policy " + catalog.AuditError: 2,
		"update-policy " + catalog.AuditDenied: 1, "delete-policy " + catalog.AuditError: 1, "delete-policy " + catalog.AuditOK: 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("audit: %d records of %s, want %d (all: %v)", count[k], k, n, count)
		}
	}
}
