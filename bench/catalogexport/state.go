package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"time"

	"github.com/coffer-backup/coffer/bench/catalogfill"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
)

// stateShape is the server's own state beside the fleet's history that
// catalogfill writes: what `coffer catalog export` copies without
// --history (the audit log is catalogfill's).
type stateShape struct {
	Users, TokensPerUser, ACLPerUser int
	Policies                         int // configuration objects made through the API
	Notifications                    int // each delivered to two targets
	Volumes, SegmentsPerVolume       int // the media inventory
	Slots, UsageSamples              int // schedule slots run, usage samples
}

// fleetState is the state of a server of issue 15's fleet: 200 users
// with two tokens and five ACL entries each, 500 policies made through
// the API, a year of notifications, 400 tapes holding four copies of
// every VM, a year of daily maintenance slots and usage samples.
var fleetState = stateShape{Users: 200, TokensPerUser: 2, ACLPerUser: 5, Policies: 500, Notifications: 5_000,
	Volumes: 400, SegmentsPerVolume: 100, Slots: 365 * 4, UsageSamples: 365}

// passwordHash is an argon2id PHC string of the form the server stores (the
// benchmark copies it, it does not check it).
const passwordHash = "$argon2id$v=19$m=65536,t=3,p=2$YmVuY2hzYWx0YmVuY2g$2i8tUPQq0cT8Pu/2a6zGm1g8a3sOeCj5mYb1W4nV1Sk"

// addState writes st into the catalog at loc unless a user of it is
// there already (a kept catalog), each part through the catalog's own
// methods, as the server writes it.
func addState(ctx context.Context, loc string, s catalogfill.Shape, st stateShape) {
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.GetUser(ctx, userName(0)); err == nil {
		return
	}
	start := time.Now()
	steps := []func(context.Context, catalog.Catalog, catalogfill.Shape, stateShape) error{addAccess, addPolicies,
		addNotifications, addMedia, addRuns}
	for _, step := range steps {
		if err := step(ctx, cat, s, st); err != nil {
			log.Fatalf("adding the server's state: %v", err)
		}
	}
	log.Printf("added the server's state (%d users, %d policies, %d notifications, %d tapes) in %.1f s", st.Users, st.Policies,
		st.Notifications, st.Volumes, time.Since(start).Seconds())
}

func userName(i int) string { return fmt.Sprintf("user-%04d", i) }

func addAccess(ctx context.Context, cat catalog.Catalog, s catalogfill.Shape, st stateShape) error {
	paths := []string{"/", "/repositories/" + s.RepositoryName, "/policies/" + catalogfill.Policy, "/connections/vc1", "/connections/vc2"}
	roles := []string{"Auditor", "Operator", "BackupOperator", "RestoreOperator", "Auditor"}
	return cat.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		for i := range st.Users {
			u := catalog.User{Name: userName(i), PasswordHash: passwordHash, Enabled: i%20 != 0, CreatedAt: s.End.AddDate(0, 0, -300+i),
				PasswordChangedAt: s.End.AddDate(0, 0, -100+i%90), LastLoginAt: s.End.Add(-time.Duration(i) * time.Hour)}
			if err := tx.InsertUser(ctx, u); err != nil {
				return err
			}
			for k := range st.TokensPerUser {
				id := fmt.Sprintf("tok-%04d-%d", i, k)
				sum := sha256.Sum256([]byte(id))
				tok := catalog.APIToken{ID: id, User: u.Name, SecretSHA256: hex.EncodeToString(sum[:]), Comment: "script " + id,
					CreatedAt: u.CreatedAt, ExpiresAt: s.End.AddDate(1, 0, 0)}
				if err := tx.InsertAPIToken(ctx, tok); err != nil {
					return err
				}
			}
			for k := range st.ACLPerUser {
				e := catalog.ACLEntry{Path: paths[k%len(paths)], User: u.Name, Role: roles[(i+k)%len(roles)], Propagate: k%2 == 0}
				if err := tx.PutACL(ctx, e); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func addPolicies(ctx context.Context, cat catalog.Catalog, s catalogfill.Shape, st stateShape) error {
	return cat.UpdateConfig(ctx, func(tx catalog.ConfigTx) error {
		for i := range st.Policies {
			spec := fmt.Sprintf(`{"connections":[%q],"select":{"names":["vm-%03d*"]},"schedule":"%d 1 * * *","retention":{"keep-last":%d}}`,
				catalogfill.Connection(i%s.Connections), i%1000, i%60, 7+i%30)
			_, err := tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: fmt.Sprintf("api-%04d", i),
				Spec: []byte(spec), CreatedBy: userName(i % st.Users)})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func addNotifications(ctx context.Context, cat catalog.Catalog, s catalogfill.Shape, st stateShape) error {
	for i := range st.Notifications {
		ev := &catalog.NotificationEvent{Time: s.End.Add(-time.Duration(i) * 26 * time.Minute), Type: "task-failed",
			Severity: "warning", Object: "/vms/" + catalogfill.VMID(i%s.VMs), Title: catalogfill.VMName(i%s.VMs) + " was not backed up",
			Data: fmt.Appendf(nil, `{"job":%d,"error":"the VM's snapshot failed"}`, i+1)}
		if _, err := cat.AddNotification(ctx, ev, []string{"ops-mail", "pager"}); err != nil {
			return err
		}
	}
	return nil
}

func addMedia(ctx context.Context, cat catalog.Catalog, s catalogfill.Shape, st stateShape) error {
	for v := range st.Volumes {
		vol := catalog.MediaVolume{Barcode: fmt.Sprintf("CF%04dL9", v), Library: "/dev/tape/lib0", Pool: "weekly",
			MediaSet: fmt.Sprintf("set-%02d", v/100), BlockSize: 262144, Labelled: s.End.AddDate(0, 0, -v), Full: true}
		segs := make([]catalog.MediaSegment, st.SegmentsPerVolume)
		for k := range segs {
			vm := (v*st.SegmentsPerVolume + k) % s.VMs
			segs[k] = catalog.MediaSegment{Barcode: vol.Barcode, Session: vol.MediaSet, Stream: int64(k + 1),
				Point: fmt.Sprintf("%064x", v*st.SegmentsPerVolume+k), VM: catalogfill.VMName(vm), Repository: s.Repository,
				PointTime: vol.Labelled, FirstSeq: int64(k) * 4096, LastSeq: int64(k)*4096 + 4095, Bytes: 1 << 30, End: true,
				Extents: []catalog.MediaExtent{{Pos: int64(k) * 4096, Count: 4096}}}
		}
		if err := cat.ReplaceMediaVolume(ctx, vol, segs); err != nil {
			return err
		}
	}
	return nil
}

func addRuns(ctx context.Context, cat catalog.Catalog, s catalogfill.Shape, st stateShape) error {
	kinds := []string{"gc", "verify", "forget", "catalog-export"}
	for i := range st.Slots {
		slot := s.End.Add(-time.Duration(i/len(kinds)) * 24 * time.Hour)
		if _, err := cat.ClaimRun(ctx, kinds[i%len(kinds)]+"-default", slot, "server-1", slot); err != nil {
			return err
		}
	}
	u, ok := cat.(catalog.Usage)
	if !ok {
		return fmt.Errorf("%T keeps no usage history", cat)
	}
	for i := range st.UsageSamples {
		at := s.End.Add(-time.Duration(i) * 24 * time.Hour)
		if err := u.AddUsageSample(ctx, catalog.UsageSample{Repository: s.Repository, At: at,
			StoredBytes: int64(40-i/10) << 40, CapacityBytes: 100 << 40}); err != nil {
			return err
		}
	}
	return nil
}
