package vsphere

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// TestMemoryFileFromTheHost: a with-memory snapshot's memory file is read
// the way the disks are: from the ESXi host with read-from: host (vCenter's
// /folder serves none of it, each request carries a ticket), through
// vCenter with read-from: vcenter; the task log names the route. vcsim
// writes an empty .vmsn, so the test fills it (the shared datastore) with
// an image after the snapshot and before the read.
func TestMemoryFileFromTheHost(t *testing.T) {
	l := startHostLab(t, 1<<20)
	ctx := context.Background()
	for _, tc := range []struct {
		readFrom    string
		from, other *endpointProxy
		route       string
	}{
		{ReadFromHost, l.host, l.vc, "read from ESXi host " + l.hostName + " (" + l.host.url.Host + "), authorised by vCenter service tickets"},
		{ReadFromVCenter, l.vc, l.host, "read through vCenter's datastore service (read-from: vcenter)"},
	} {
		c := l.connect(t, func(c *Config) { c.ReadFrom = tc.readFrom })
		sess, err := c.Snapshot(ctx, l.ref(), hypervisor.SnapshotRequest{SessionID: "mem-" + tc.readFrom, Mode: hypervisor.WithMemory})
		if err != nil {
			t.Fatal(err)
		}
		var vmsn *hypervisor.DiskSnapshot
		for _, d := range sess.Disks() {
			if d.Key == memoryVMSNKey {
				vmsn = &d
			}
		}
		if vmsn == nil {
			t.Fatalf("%s: no memory stream in %+v", tc.readFrom, sess.Disks())
		}
		ds, p := splitDSPath(vmsn.Path)
		img := randomBytes(t, 3<<20+777)
		if err := os.WriteFile(filepath.Join(l.s.dsDirs[ds], p), img, 0o600); err != nil {
			t.Fatal(err)
		}
		from, other := tc.from.folderBytes.Load(), tc.other.folderRequests.Load()
		rd, err := sess.OpenDisk(ctx, memoryVMSNKey)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, rd.Size())
		if n, err := rd.ReadAt(got, 0); n != len(img) || err != nil || !bytes.Equal(got, img) {
			t.Fatalf("%s: read %d of %d bytes, %v; equal %v", tc.readFrom, n, len(img), err, bytes.Equal(got, img))
		}
		rd.Close()
		if n := tc.from.folderBytes.Load() - from; n < int64(len(img)) {
			t.Fatalf("%s: the expected endpoint served %d bytes of the %d-byte memory file", tc.readFrom, n, len(img))
		}
		if n := tc.other.folderRequests.Load() - other; n != 0 {
			t.Fatalf("%s: the other endpoint had %d /folder requests", tc.readFrom, n)
		}
		notes := sess.(hypervisor.Noter).Notes()
		if len(notes) != 1 || notes[0] != "memory file "+filepath.Base(p)+" "+tc.route {
			t.Fatalf("%s: notes %q", tc.readFrom, notes)
		}
		if len(sess.Warnings()) != 0 {
			t.Fatalf("%s: warnings %q", tc.readFrom, sess.Warnings())
		}
		t.Logf("memory file, read-from: %s: %d bytes; vCenter /folder served %d bytes in all, host /folder %d", tc.readFrom, len(img),
			l.vc.folderBytes.Load(), l.host.folderBytes.Load())
		if _, err := sess.Close(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	if l.host.refused.Load() != 0 {
		t.Fatalf("the host refused %d requests", l.host.refused.Load())
	}

	// A whole with-memory backup: the memory stream goes the host's way
	// too (vcsim's own .vmsn, empty), and nothing through vCenter.
	vcBefore := l.vc.folderRequests.Load()
	snap, notes, err := backupLabMode(t, l, newRepo(t), l.connect(t, nil), hypervisor.WithMemory)
	if err != nil {
		t.Fatal(err)
	}
	if len(memoryStreams(snap)) != 1 || snap.SnapshotModeAchieved != string(hypervisor.WithMemory) {
		t.Fatalf("point %+v", snap.Disks)
	}
	joined := strings.Join(notes, "\n")
	if len(notes) != 2 || !strings.Contains(joined, "memory file ") || strings.Count(joined, "from ESXi host "+l.hostName) != 2 ||
		l.vc.folderRequests.Load() != vcBefore {
		t.Fatalf("notes %q; vCenter /folder requests %d", notes, l.vc.folderRequests.Load()-vcBefore)
	}
}
