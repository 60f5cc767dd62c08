package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// configNames lists objects as kind/name@version.
func configNames(os []catalog.ConfigObject) []string {
	out := []string{}
	for _, o := range os {
		out = append(out, fmt.Sprintf("%s/%s@%d", o.Kind, o.Name, o.Version))
	}
	return out
}

// testConfigObjects: objects are created, replaced and deleted under the
// rules of optimistic concurrency; every change takes the next
// generation, which is the changed object's version, so versions only
// grow and are not reused by an object created again; another handle
// (process) sees every change.
func testConfigObjects(t *testing.T, open Opener) {
	c, other := mustOpen(t, open), mustOpen(t, open)
	ctx := context.Background()
	gen, err := c.ConfigGeneration(ctx)
	ok(t, err)
	same(t, "generation of an empty catalog", gen, int64(0))
	objs, gen, err := c.ListConfigObjects(ctx)
	ok(t, err)
	same(t, "objects of an empty catalog", len(objs), 0)
	same(t, "listed generation of an empty catalog", gen, int64(0))

	update := func(fn func(catalog.ConfigTx) error) error { return c.UpdateConfig(ctx, fn) }
	var nightly, lab catalog.ConfigObject
	ok(t, update(func(tx catalog.ConfigTx) error {
		var err error
		if lab, err = tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "connection", Name: "lab", Spec: []byte(`{"kind":"qemu"}`),
			CreatedBy: "alice"}); err != nil {
			return err
		}
		nightly, err = tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "nightly",
			Spec: []byte(`{"connection":"lab"}`), CreatedBy: "alice"})
		return err
	}))
	same(t, "versions of two creations", []int64{lab.Version, nightly.Version}, []int64{1, 2})
	if nightly.CreatedAt.IsZero() || !nightly.UpdatedAt.Equal(nightly.CreatedAt) || nightly.UpdatedBy != "alice" {
		t.Fatalf("created object: %+v", nightly)
	}
	objs, gen, err = other.ListConfigObjects(ctx)
	ok(t, err)
	same(t, "objects seen by another handle", configNames(objs), []string{"connection/lab@1", "policy/nightly@2"})
	same(t, "generation seen by another handle", gen, int64(2))
	same(t, "object read back", objs[1], nightly)

	err = update(func(tx catalog.ConfigTx) error {
		_, err := tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "nightly", Spec: []byte(`{}`)})
		return err
	})
	if !errors.Is(err, catalog.ErrConflict) {
		t.Fatalf("creating an object that exists: %v, want ErrConflict", err)
	}
	// The same name in another kind is another object.
	ok(t, update(func(tx catalog.ConfigTx) error {
		_, err := tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "repository", Name: "nightly", Spec: []byte(`{}`)})
		return err
	}))

	var changed catalog.ConfigObject
	ok(t, update(func(tx catalog.ConfigTx) error {
		var err error
		changed, err = tx.UpdateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "nightly",
			Spec: []byte(`{"connection":"lab","schedule":"@daily"}`), UpdatedBy: "bob"}, nightly.Version)
		return err
	}))
	if changed.Version != 4 || changed.CreatedBy != "alice" || !changed.CreatedAt.Equal(nightly.CreatedAt) || changed.UpdatedBy != "bob" ||
		changed.UpdatedAt.Before(nightly.UpdatedAt) || string(changed.Spec) != `{"connection":"lab","schedule":"@daily"}` {
		t.Fatalf("updated object: %+v", changed)
	}
	// A change made against the version before is refused, and so is a
	// delete; version 0 means no condition.
	for what, fn := range map[string]func(tx catalog.ConfigTx) error{
		"update": func(tx catalog.ConfigTx) error {
			_, err := tx.UpdateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "nightly", Spec: []byte(`{}`)}, nightly.Version)
			return err
		},
		"delete": func(tx catalog.ConfigTx) error {
			_, err := tx.DeleteConfigObject(ctx, "policy", "nightly", nightly.Version)
			return err
		},
	} {
		if err := update(fn); !errors.Is(err, catalog.ErrStale) {
			t.Fatalf("stale %s: %v, want ErrStale", what, err)
		}
	}
	ok(t, update(func(tx catalog.ConfigTx) error {
		var err error
		changed, err = tx.UpdateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "nightly", Spec: []byte(`{"connection":"lab"}`),
			UpdatedBy: "carol"}, 0)
		return err
	}))
	same(t, "version after an unconditional update", changed.Version, int64(5))
	for what, fn := range map[string]func(tx catalog.ConfigTx) error{
		"update": func(tx catalog.ConfigTx) error {
			_, err := tx.UpdateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "weekly", Spec: []byte(`{}`)}, 0)
			return err
		},
		"delete": func(tx catalog.ConfigTx) error {
			_, err := tx.DeleteConfigObject(ctx, "policy", "weekly", 0)
			return err
		},
	} {
		wantNotFound(t, what+" of a missing object", update(fn))
	}

	var deleted catalog.ConfigObject
	ok(t, update(func(tx catalog.ConfigTx) error {
		var err error
		deleted, err = tx.DeleteConfigObject(ctx, "policy", "nightly", changed.Version)
		return err
	}))
	same(t, "deleted object", deleted, changed)
	ok(t, update(func(tx catalog.ConfigTx) error {
		var err error
		nightly, err = tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "nightly", Spec: []byte(`{}`)})
		return err
	}))
	same(t, "version of an object created again", nightly.Version, int64(7))
	objs, gen, err = other.ListConfigObjects(ctx)
	ok(t, err)
	same(t, "objects at the end", configNames(objs), []string{"connection/lab@1", "policy/nightly@7", "repository/nightly@3"})
	same(t, "generation at the end", gen, int64(7))
	gen, err = other.ConfigGeneration(ctx)
	ok(t, err)
	same(t, "ConfigGeneration at the end", gen, int64(7))
}

// testUpdateConfigIsAtomic: a change and its audit record are written
// together or not at all, and a transaction that fails leaves no object,
// record or generation behind.
func testUpdateConfigIsAtomic(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	refused := errors.New("refused after writing")
	err := c.UpdateConfig(ctx, func(tx catalog.ConfigTx) error {
		if _, err := tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "p", Spec: []byte(`{}`)}); err != nil {
			return err
		}
		if err := tx.AppendAudit(ctx, []catalog.AuditRecord{{User: "alice", Operation: "create-policy", Object: "/policies/p",
			Result: catalog.AuditOK}}); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("UpdateConfig returned %v, want the error of fn", err)
	}
	objs, gen, err := c.ListConfigObjects(ctx)
	ok(t, err)
	records, err := c.ListAudit(ctx, catalog.AuditFilter{})
	ok(t, err)
	if len(objs) != 0 || gen != 0 || len(records) != 0 {
		t.Fatalf("a failed transaction left %d objects, generation %d and %d audit records", len(objs), gen, len(records))
	}
	ok(t, c.UpdateConfig(ctx, func(tx catalog.ConfigTx) error {
		if _, err := tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "p", Spec: []byte(`{}`)}); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, []catalog.AuditRecord{{User: "alice", Operation: "create-policy", Object: "/policies/p",
			Result: catalog.AuditOK, Detail: "version 1"}})
	}))
	records, err = c.ListAudit(ctx, catalog.AuditFilter{Object: "/policies/p"})
	ok(t, err)
	if len(records) != 1 || records[0].Operation != "create-policy" || records[0].Detail != "version 1" {
		t.Fatalf("audit records of the change: %+v", records)
	}
}

// testUpdateConfigIsSerialised: changes that read every object, decide
// and write, run from several handles (processes) at once, each see the
// ones before: every writer names its object after the count it read, so
// two writers deciding on the same state would collide.
func testUpdateConfigIsSerialised(t *testing.T, open Opener) {
	const handles, goroutines, changes = 3, 3, 5
	cats := make([]catalog.Catalog, handles)
	for i := range cats {
		cats[i] = mustOpen(t, open)
	}
	g, ctx := errgroup.WithContext(context.Background())
	for h := range handles {
		for range goroutines {
			g.Go(func() error {
				for range changes {
					err := cats[h].UpdateConfig(ctx, func(tx catalog.ConfigTx) error {
						objs, _, err := tx.ListConfigObjects(ctx)
						if err != nil {
							return err
						}
						_, err = tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: fmt.Sprintf("p%03d", len(objs)),
							Spec: []byte(`{}`)})
						return err
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
	objs, gen, err := cats[0].ListConfigObjects(context.Background())
	ok(t, err)
	same(t, "objects", len(objs), handles*goroutines*changes)
	same(t, "generation", gen, int64(handles*goroutines*changes))
}
