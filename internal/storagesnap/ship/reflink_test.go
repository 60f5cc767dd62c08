package ship

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// newReflinkSite is a site whose datastore is on XFS with reflink, and
// whose DR filesystem is a second one.
func newReflinkSite(t *testing.T) *site {
	testutil.RequireBinary(t, "mkfs.xfs")
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	dr := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	s := &site{prov: policy.StorageProvider{Name: "sub", Kind: "reflink", Connections: []string{"lab"}},
		root: filepath.Join(mnt, "vms"), state: t.TempDir(), to: filepath.Join(dr, "lab")}
	s.addDisks(t)
	return s
}

// TestShipSendsTheChangedExtentsOfReflinkSnapshots: the first kept
// snapshot of a reflink datastore goes to the DR filesystem whole, the
// second as its change only (the extents the two snapshots' clones no
// longer share), its copy a clone of the first copy that shares every
// other extent with it. Each copy equals its source snapshot byte for
// byte, a shipment with nothing new sends nothing, and a VM's disks come
// back at the DR site from a copy.
func TestShipSendsTheChangedExtentsOfReflinkSnapshots(t *testing.T) {
	s := newReflinkSite(t)
	ctx := context.Background()
	first := s.keep(t)
	got, err := Ship(ctx, s.state, s.targets())
	if err != nil || len(got) != 1 || got[0].Label != first || got[0].Parent != "" {
		t.Fatalf("first shipment %+v, %v", got, err)
	}
	if got[0].Bytes != 2*diskSize {
		t.Fatalf("a whole shipment of two %d-byte disks of random data wrote %d bytes", diskSize, got[0].Bytes)
	}
	s.change(t)
	second := s.keep(t)
	got, err = Ship(ctx, s.state, s.targets())
	if err != nil || len(got) != 1 || got[0].Label != second || got[0].Parent != first {
		t.Fatalf("second shipment %+v, %v", got, err)
	}
	if got[0].Bytes < changeSize || got[0].Bytes > 2*changeSize {
		t.Fatalf("incremental shipment after a %d-byte change wrote %d bytes", changeSize, got[0].Bytes)
	}
	t.Logf("shipments: whole %d bytes, incremental %d bytes for a %d-byte change", 2*diskSize, got[0].Bytes, changeSize)
	s.sameAsSource(t)
	// At the DR site the second copy shares all but the change with the
	// first: the change alone took new space.
	for i, d := range s.disks {
		rel, _ := filepath.Rel(s.root, d.Path)
		diff, err := storagesnap.ChangedFileRanges(filepath.Join(s.to, first, rel), filepath.Join(s.to, second, rel))
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for _, e := range diff {
			n += e.Length
		}
		if (i == 0 && (n < changeSize || n > 2*changeSize)) || (i > 0 && n != 0) {
			t.Fatalf("the DR copies of %s share all but %d bytes", rel, n)
		}
	}
	if again, err := Ship(ctx, s.state, s.targets()); err != nil || len(again) != 0 {
		t.Fatalf("a shipment with nothing new sent %+v, %v", again, err)
	}

	restored := t.TempDir()
	if _, err := storagesnap.Restore(ctx, s.to, second, "web", restored, offload.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range s.disks {
		rel, _ := filepath.Rel(s.root, d.Path)
		want, _ := os.ReadFile(filepath.Join(s.root, storagesnap.SnapDir, second, rel))
		if got, err := os.ReadFile(filepath.Join(restored, d.Name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("restored %s from the shipped copy differs from the snapshot (%v)", d.Name, err)
		}
	}
}

// A reflink shipment killed at each step: the copy it was making is not
// counted, and the next shipment resumes against the copy already there
// and ends with every copy equal to its source.
func TestReflinkShipKilledAtEveryStepResumes(t *testing.T) {
	for _, at := range []string{"streaming#1", "received#1", "recorded#1", "streaming#2", "received#2"} {
		t.Run(at, func(t *testing.T) {
			s := newReflinkSite(t)
			s.keep(t)
			s.change(t)
			s.keep(t)
			killAt(t, s, at)
			there, err := storagesnap.List(s.to)
			if err != nil {
				t.Fatal(err)
			}
			if len(there) >= len(s.labels) {
				t.Fatalf("killed at %s, yet %d copies are counted", at, len(there))
			}
			got, err := Ship(context.Background(), s.state, s.targets())
			if err != nil || len(got) != len(s.labels)-len(there) {
				t.Fatalf("resumed shipment %+v, %v (after %d counted)", got, err, len(there))
			}
			if len(there) == 1 && got[0].Parent != s.labels[0] {
				t.Fatalf("resumed shipment sent %s whole, not against the copy already there", got[0].Label)
			}
			s.sameAsSource(t)
			if left, _ := filepath.Glob(filepath.Join(s.to, partialPrefix+"*")); len(left) != 0 {
				t.Fatalf("left after the resumed shipment: %v", left)
			}
		})
	}
}
