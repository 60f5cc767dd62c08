package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/configops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// OpenCatalog opens the environment's catalog.
func (e *confEnv) openCatalog() catalog.Catalog {
	e.t.Helper()
	c, err := catalogopen.Open(context.Background(), e.catalog)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestConfigChangesAuditedWithoutSecrets: every change and every refused
// change is in the audit log under its operation ID, the object's path
// and its user, with the versions; no secret (the files' contents, or a
// password written inline and refused) is in any document, error, audit
// record or stored object.
func TestConfigChangesAuditedWithoutSecrets(t *testing.T) {
	e := newConfEnv(t, "")
	s := e.service()
	ctx := service.WithRemoteAddr(e.ctx, "192.0.2.7")
	secrets := []string{"s3cret-repo-pw-7d1e", "s3cret-vc-pw-91aa", "s3cret-smtp-pw-0c4f", "s3cret-inline-5b2e"}
	var docs []any
	do := func(doc any, err error) error {
		docs = append(docs, doc, fmt.Sprint(err))
		return err
	}
	must := func(doc any, err error) {
		t.Helper()
		if do(doc, err) != nil {
			t.Fatal(err)
		}
	}
	must(servicetest.CreateObject(ctx, s, "repository", spec(t, fmt.Sprintf(
		`{name: main, location: /srv/main, password-file: %s}`, e.secretFile("main.pw", secrets[0])))))
	must(servicetest.CreateObject(ctx, s, "connection", spec(t, fmt.Sprintf(
		`{name: vc, kind: vsphere, options: {url: "https://vc.example.com/sdk", user: coffer, password-file: %s, insecure: true}}`,
		e.secretFile("vc.pw", secrets[1])))))
	must(servicetest.CreateObject(ctx, s, "notification-target", spec(t, fmt.Sprintf(
		`{name: mail, smtp: {host: mail.example.com, username: coffer, password-file: %s, from: coffer@example.com, to: [ops@example.com]}}`,
		e.secretFile("smtp.pw", secrets[2])))))
	must(servicetest.UpdateObject(ctx, s, "repository", "main", spec(t, fmt.Sprintf(
		`{location: /srv/main2, password-file: %s, streams: 4}`, filepath.Join(e.dir, "main.pw"))), 0))
	for _, c := range []struct{ kind, doc string }{
		{"repository", `{name: inline, location: /srv/x, password: ` + secrets[3] + `}`},
		{"connection", `{name: inline, kind: vsphere, options: {url: "https://vc/sdk", password: ` + secrets[3] + `}}`},
		{"notification-target", `{name: inline, smtp: {host: h, password: ` + secrets[3] + `, from: a@b.c, to: [d@e.f]}}`},
	} {
		err := do(servicetest.CreateObject(ctx, s, c.kind, spec(t, c.doc)))
		wantClass(t, "an inline secret", err, api.Invalid, "secrets are not written in the configuration")
	}
	err := do(servicetest.DeleteObject(ctx, s, "repository", "gone", 0))
	wantClass(t, "deleting a missing object", err, api.NotFound, "gone")
	must(servicetest.DeleteObject(ctx, s, "notification-target", "mail", 0))
	must(servicetest.ListObjects(ctx, s, ""))
	must(configops.Ops{Service: s}.EffectiveConfig(ctx, &api.GetEffectiveConfigInput{}))

	cat := e.openCatalog()
	records, err := cat.ListAudit(context.Background(), catalog.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(records) - 1; i >= 0; i-- {
		r := records[i]
		if r.User != "alice" || r.RemoteAddr != "192.0.2.7" {
			t.Errorf("record %+v: want alice from 192.0.2.7", r)
		}
		got = append(got, fmt.Sprintf("%s %s %s%s %s", r.Operation, r.Object, r.Result, "/"+r.ErrorClass, lineRef.ReplaceAllString(r.Detail, "")))
		docs = append(docs, r)
	}
	want := []string{
		"create-repository /repositories/main ok/ version 1",
		"create-connection /connections/vc ok/ version 2",
		"create-notification-target /system/notification-targets/mail ok/ version 3",
		"update-repository /repositories/main ok/ version 4 (was 1): changed location, streams",
		"create-repository /repositories/inline error/invalid ",
		"create-connection /connections/inline error/invalid ",
		"create-notification-target /system/notification-targets/inline error/invalid ",
		"delete-repository /repositories/gone error/not-found ",
		"delete-notification-target /system/notification-targets/mail ok/ version 3 deleted",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	objs, _, err := cat.ListConfigObjects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		docs = append(docs, string(o.Spec))
	}
	b, err := json.Marshal(docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range secrets {
		if strings.Contains(string(b), secret) {
			t.Errorf("secret %q is in a document, error, audit record or stored object", secret)
		}
	}
	if !strings.Contains(e.catalog, "://") {
		db, err := os.ReadFile(e.catalog)
		if err != nil {
			t.Fatal(err)
		}
		wal, _ := os.ReadFile(e.catalog + "-wal")
		for _, secret := range secrets {
			if strings.Contains(string(db)+string(wal), secret) {
				t.Errorf("secret %q is in the catalog's files", secret)
			}
		}
	}
}
