package s3_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/coffer-backup/coffer/internal/store"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestVersionsAndUnhide: on an Object Lock bucket a locked object hidden
// by a rewrite and a delete marker is listed with all its versions in
// order and their locks; ExtendVersionRetention locks a version that is
// not the current one; Unhide makes the locked version current again,
// brings back an unlocked object hidden by a marker only, and leaves
// alone an object nobody touched and the locked version itself.
func TestVersionsAndUnhide(t *testing.T) {
	srv := testutil.StartS3(t)
	ctx := context.Background()
	bucket := srv.Bucket(t, true)
	s, err := s3store.Open(ctx, s3store.Config{Bucket: bucket, Prefix: "repo", Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, LockMode: "governance"})
	if err != nil {
		t.Fatal(err)
	}
	cli := srv.Client()
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	put := func(name, body string, retain time.Time) {
		if _, err := store.Put(ctx, s, name, []byte(body), store.PutOptions{RetainUntil: retain}); err != nil {
			t.Fatal(err)
		}
	}
	hide := func(name string) {
		if _, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String("repo/" + name)}); err != nil {
			t.Fatal(err)
		}
	}
	put("config", "the config", until)
	put("config", "ransom note", time.Time{})
	hide("config")
	put("index/seg", "segment", time.Time{})
	hide("index/seg")
	put("data/pack", "pack", time.Time{})

	var got []store.Version
	err = s.Versions(ctx, "config", func(name string, vs []store.Version) error {
		if name == "config" {
			got = vs
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Marker || !got[0].RetainUntil.Equal(until) || got[1].Marker || !got[1].RetainUntil.IsZero() || !got[2].Marker {
		t.Fatalf("versions of config, oldest first: %+v", got)
	}
	later := until.Add(24 * time.Hour)
	if err := s.ExtendVersionRetention(ctx, got[0], later); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVersion(ctx, store.Version{Name: "config", ID: got[0].ID, RetainUntil: later}); !errors.Is(err, store.ErrRetained) {
		t.Fatalf("delete of the locked version: %v", err)
	}

	rep, err := store.Unhide(ctx, s, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Objects != 2 || rep.Markers != 2 || rep.Versions != 1 || strings.Join(rep.Names, " ") != "config index/seg" {
		t.Fatalf("unhide: %+v", rep)
	}
	for name, want := range map[string]string{"config": "the config", "index/seg": "segment", "data/pack": "pack"} {
		b, err := store.Get(ctx, s, name, 0, -1)
		if err != nil || string(b) != want {
			t.Fatalf("%s after unhide: %q %v, want %q", name, b, err, want)
		}
	}
	fi, err := s.Stat(ctx, "config")
	if err != nil || !fi.RetainUntil.Equal(later) {
		t.Fatalf("config's lock after unhide: %v %v, want %v", fi.RetainUntil, err, later)
	}
	if rep, err := store.Unhide(ctx, s, "", time.Now()); err != nil || rep.Objects != 0 {
		t.Fatalf("second unhide: %+v %v", rep, err)
	}
}
