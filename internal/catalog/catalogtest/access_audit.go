package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func testAudit(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	in := []catalog.AuditRecord{
		{Time: at(0), User: "alice", Operation: "login", Result: catalog.AuditOK, RemoteAddr: "192.0.2.1"},
		{Time: at(time.Minute), User: "alice", TokenID: "t1", Operation: "backup-policy", Object: "/policies/nightly",
			Result: catalog.AuditOK, Detail: "3 VMs"},
		{Time: at(2 * time.Minute), User: "bob", Operation: "restore-vm", Object: "/connections/c1/vm/web",
			Result: catalog.AuditDenied, ErrorClass: "denied"},
		{Time: at(3 * time.Minute), User: "bob", Operation: "restore-vm", Object: "/connections/c1/vm/web10",
			Result: catalog.AuditError, ErrorClass: "not-found"},
		{Time: at(4 * time.Minute), User: "bob", Operation: "list-vms", Object: "/connections/c1",
			Result: catalog.AuditOK},
	}
	ok(t, c.AppendAudit(ctx, in[:2]))
	ok(t, c.AppendAudit(ctx, in[2:]))
	ok(t, c.AppendAudit(ctx, nil))
	ops := func(f catalog.AuditFilter) []string {
		t.Helper()
		rs, err := c.ListAudit(ctx, f)
		ok(t, err)
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = fmt.Sprintf("%s@%d", r.Operation, r.Time.Sub(at(0))/time.Minute)
		}
		return out
	}
	all, err := c.ListAudit(ctx, catalog.AuditFilter{})
	ok(t, err)
	same(t, "records", len(all), len(in))
	want := in[1]
	want.ID = all[3].ID
	same(t, "record read back", all[3], want)
	same(t, "newest first", ops(catalog.AuditFilter{}),
		[]string{"list-vms@4", "restore-vm@3", "restore-vm@2", "backup-policy@1", "login@0"})
	same(t, "by user", ops(catalog.AuditFilter{User: "alice"}), []string{"backup-policy@1", "login@0"})
	same(t, "by token", ops(catalog.AuditFilter{TokenID: "t1"}), []string{"backup-policy@1"})
	same(t, "by operation", ops(catalog.AuditFilter{Operation: "restore-vm"}), []string{"restore-vm@3", "restore-vm@2"})
	same(t, "by result", ops(catalog.AuditFilter{Result: catalog.AuditDenied}), []string{"restore-vm@2"})
	// An object matches itself and what is below it, on path boundaries.
	same(t, "object and below", ops(catalog.AuditFilter{Object: "/connections/c1"}),
		[]string{"list-vms@4", "restore-vm@3", "restore-vm@2"})
	same(t, "object web, not web10", ops(catalog.AuditFilter{Object: "/connections/c1/vm/web"}), []string{"restore-vm@2"})
	same(t, "object /", len(ops(catalog.AuditFilter{Object: "/"})), len(in))
	same(t, "since/until", ops(catalog.AuditFilter{Since: at(time.Minute), Until: at(3 * time.Minute)}),
		[]string{"restore-vm@2", "backup-policy@1"})

	// Paging by the last ID of a page sees every record once.
	var paged []string
	f := catalog.AuditFilter{Limit: 2}
	for {
		rs, err := c.ListAudit(ctx, f)
		ok(t, err)
		if len(rs) == 0 {
			break
		}
		for _, r := range rs {
			paged = append(paged, fmt.Sprintf("%s@%d", r.Operation, r.Time.Sub(at(0))/time.Minute))
		}
		f.BeforeID = rs[len(rs)-1].ID
	}
	same(t, "pages", paged, ops(catalog.AuditFilter{}))

	for _, bad := range []catalog.AuditRecord{{Operation: "x", Result: "maybe"}, {Result: catalog.AuditOK}} {
		if err := c.AppendAudit(ctx, []catalog.AuditRecord{in[0], bad}); err == nil {
			t.Fatalf("audit record %+v accepted", bad)
		}
	}
	same(t, "records after refused appends", len(ops(catalog.AuditFilter{})), len(in))
}

// An access transaction that fails leaves nothing behind, its audit
// record included.
func testUpdateAccessAtomic(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	boom := errors.New("boom")
	err := updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.InsertUser(ctx, user("alice")))
		ok(t, tx.PutACL(ctx, catalog.ACLEntry{Path: "/", User: "alice", Role: "Admin", Propagate: true}))
		ok(t, tx.AppendAudit(ctx, []catalog.AuditRecord{{User: "alice", Operation: "create-user", Result: catalog.AuditOK}}))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("UpdateAccess returned %v, want fn's error", err)
	}
	users, err := c.ListUsers(ctx)
	ok(t, err)
	acl, err := c.ListACL(ctx, catalog.ACLFilter{})
	ok(t, err)
	audit, err := c.ListAudit(ctx, catalog.AuditFilter{})
	ok(t, err)
	if len(users)+len(acl)+len(audit) != 0 {
		t.Fatalf("a failed access transaction left %d users, %d ACL entries, %d audit records", len(users), len(acl), len(audit))
	}
}

// Access transactions are ordered across handles (processes): each reads
// a counter and writes it back one higher, as a login throttle does, and
// no increment is lost.
func testUpdateAccessSerialised(t *testing.T, open Opener) {
	const handles, goroutines, increments = 3, 3, 10
	cats := make([]catalog.Catalog, handles)
	for i := range cats {
		cats[i] = mustOpen(t, open)
	}
	g, ctx := errgroup.WithContext(context.Background())
	for h := range handles {
		for range goroutines {
			g.Go(func() error {
				for range increments {
					err := cats[h].UpdateAccess(ctx, func(tx catalog.AccessTx) error {
						l, err := tx.GetLoginThrottle(ctx, "counter")
						if errors.Is(err, catalog.ErrNotFound) {
							l, err = catalog.LoginThrottle{Key: "counter", LastFailureAt: at(0)}, nil
						}
						if err != nil {
							return err
						}
						l.Failures++
						return tx.PutLoginThrottle(ctx, l)
					})
					if err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	ok(t, g.Wait())
	l, err := cats[0].GetLoginThrottle(context.Background(), "counter")
	ok(t, err)
	same(t, "increments", l.Failures, handles*goroutines*increments)
}
