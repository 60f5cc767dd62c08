package ship

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

const (
	diskSize   = 24 << 20
	changeSize = 1 << 20
)

// site is a btrfs datastore with kept snapshots, and a second btrfs
// filesystem to ship them to.
type site struct {
	prov            policy.StorageProvider
	root, state, to string
	disks           []hypervisor.DiskInfo
	labels          []string
}

func newSite(t *testing.T) *site {
	testutil.RequireBinary(t, "btrfs")
	mnt := testutil.MountLoopFS(t, "btrfs", 256<<20, "-q")
	dr := testutil.MountLoopFS(t, "btrfs", 256<<20, "-q")
	s := &site{prov: provider(), root: filepath.Join(mnt, "vms"), state: t.TempDir(), to: filepath.Join(dr, "lab")}
	run(t, "btrfs", "subvolume", "create", s.root)
	s.addDisks(t)
	return s
}

// addDisks writes the site's two disks of random data.
func (s *site) addDisks(t *testing.T) {
	for _, name := range []string{"web/vda.raw", "vdb.raw"} {
		p := filepath.Join(s.root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, random(t, diskSize), 0o600); err != nil {
			t.Fatal(err)
		}
		s.disks = append(s.disks, hypervisor.DiskInfo{Name: filepath.Base(p), Path: p, Format: "raw", Size: diskSize, Datastore: filepath.Dir(p)})
	}
}

func random(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v %s", name, args, err, out)
	}
	return string(out)
}

func provider() policy.StorageProvider {
	return policy.StorageProvider{Name: "sub", Kind: "btrfs", Connections: []string{"lab"}}
}

// keep takes a snapshot of the datastore and keeps it, as a policy run
// with keep-storage-snapshots does.
func (s *site) keep(t *testing.T) string {
	label := fmt.Sprintf("coffer-job%d-vms", len(s.labels)+1)
	ctx := context.Background()
	ss, err := storagesnap.Create(ctx, s.prov, s.root, s.state, label, s.disks)
	if err != nil {
		t.Fatal(err)
	}
	k := hypervisor.KeptSnapshot{Policy: "nightly", Connection: "lab", VMs: []hypervisor.KeptVM{{VMRef: hypervisor.VMRef{Name: "web", ID: "u1"}, Disks: s.disks}}}
	if err := ss.(hypervisor.StorageKeeper).Keep(ctx, k); err != nil {
		t.Fatal(err)
	}
	s.labels = append(s.labels, label)
	return label
}

// change overwrites changeSize bytes of the first disk, in place.
func (s *site) change(t *testing.T) {
	f, err := os.OpenFile(s.disks[0].Path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(random(t, changeSize), 4<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func (s *site) targets() []Target {
	return []Target{{Provider: s.prov.Name, Kind: s.prov.Kind, To: s.to}}
}

// sameAsSource checks every shipped copy file by file against its source
// snapshot, and that each copy is recorded as a kept snapshot there.
func (s *site) sameAsSource(t *testing.T) {
	t.Helper()
	there, err := storagesnap.List(s.to)
	if err != nil || len(there) != len(s.labels) {
		t.Fatalf("shipped records %+v (%v), want %v", there, err, s.labels)
	}
	for i, label := range s.labels {
		if there[i].Label != label || there[i].Dir != filepath.Join(s.to, label) {
			t.Fatalf("shipped record %d: %+v, want %s", i, there[i], label)
		}
		for _, d := range s.disks {
			rel, _ := filepath.Rel(s.root, d.Path)
			src, err := os.ReadFile(filepath.Join(s.root, storagesnap.SnapDir, label, rel))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(s.to, label, rel))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(src, got) {
				t.Fatalf("%s of %s differs from its source snapshot", rel, label)
			}
		}
	}
}

// The DR copy of each kept snapshot equals it byte for byte, the second
// shipment's stream is about the change, and a VM's disks come back at
// the DR site from the copy by the restore from a storage snapshot.
func TestShipSendsKeptSnapshotsIncrementally(t *testing.T) {
	s := newSite(t)
	ctx := context.Background()
	first := s.keep(t)
	got, err := Ship(ctx, s.state, s.targets())
	if err != nil || len(got) != 1 || got[0].Label != first || got[0].Parent != "" {
		t.Fatalf("first shipment %+v, %v", got, err)
	}
	if got[0].Bytes < 2*diskSize {
		t.Fatalf("a whole shipment of two %d-byte disks sent %d bytes", diskSize, got[0].Bytes)
	}
	s.change(t)
	second := s.keep(t)
	got, err = Ship(ctx, s.state, s.targets())
	if err != nil || len(got) != 1 || got[0].Label != second || got[0].Parent != first {
		t.Fatalf("second shipment %+v, %v", got, err)
	}
	// The change plus the stream's commands and metadata, never a disk.
	if got[0].Bytes < changeSize || got[0].Bytes > 2*changeSize {
		t.Fatalf("incremental shipment after a %d-byte change sent %d bytes", changeSize, got[0].Bytes)
	}
	t.Logf("shipments: whole %d bytes, incremental %d bytes for a %d-byte change", 2*diskSize, got[0].Bytes, changeSize)
	s.sameAsSource(t)
	if again, err := Ship(ctx, s.state, s.targets()); err != nil || len(again) != 0 {
		t.Fatalf("a shipment with nothing new sent %+v, %v", again, err)
	}

	restored := t.TempDir()
	if _, err := storagesnap.Restore(ctx, s.to, first, "web", restored, offload.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range s.disks {
		rel, _ := filepath.Rel(s.root, d.Path)
		want, _ := os.ReadFile(filepath.Join(s.root, storagesnap.SnapDir, first, rel))
		if got, err := os.ReadFile(filepath.Join(restored, d.Name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("restored %s from the shipped copy differs from the snapshot (%v)", d.Name, err)
		}
	}
}

func TestShipRefusesATargetNotOnBtrfs(t *testing.T) {
	s := newSite(t)
	s.keep(t)
	_, err := Ship(context.Background(), s.state, []Target{{Provider: "sub", To: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "is not on btrfs") {
		t.Fatalf("shipping to a directory not on btrfs: %v", err)
	}
}

// A shipment killed (with its btrfs processes) at each step: the copy it
// was making is not counted, and the next shipment resumes and ends with
// every copy equal to its source.
func TestShipKilledAtEveryStepResumes(t *testing.T) {
	for _, at := range []string{"streaming#1", "received#1", "recorded#1", "streaming#2", "received#2"} {
		t.Run(at, func(t *testing.T) {
			s := newSite(t)
			s.keep(t)
			s.change(t)
			s.keep(t)
			killAt(t, s, at)
			there, err := storagesnap.List(s.to)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range there {
				if !storagesnap.IsSubvolume(k.Dir) {
					t.Fatalf("%s is counted as shipped with no subvolume", k.Label)
				}
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
		})
	}
}

func killAt(t *testing.T, s *site, at string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestShipHelperProcess$")
	cmd.Env = append(os.Environ(), "SHIP_HELPER=1", "SHIP_STATE="+s.state, "SHIP_TO="+s.to, "SHIP_AT="+at, "SHIP_KIND="+s.prov.Kind)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the helper and its btrfs processes, killed together
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 256)
	n, _ := out.Read(line)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	// The helper's btrfs processes die on their own time: the next
	// shipment starts once none is left (as it would after a crash).
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(-cmd.Process.Pid, 0) == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the killed helper's processes are still running after 30s")
		}
		runtime.Gosched()
	}
	if got := string(line[:n]); !strings.HasPrefix(got, "AT "+at) {
		t.Fatalf("helper did not reach %s: %q %s", at, got, stderr.String())
	}
}

// TestShipHelperProcess is the process the kill test kills; it does
// nothing in a normal test run.
func TestShipHelperProcess(t *testing.T) {
	if os.Getenv("SHIP_HELPER") != "1" {
		return
	}
	at := os.Getenv("SHIP_AT")
	seen := map[string]int{}
	killPoint = func(s string) {
		seen[s]++
		if fmt.Sprintf("%s#%d", s, seen[s]) == at {
			fmt.Printf("AT %s\n", at)
			_ = os.Stdout.Sync()
			select {} // killed here
		}
	}
	_, err := Ship(context.Background(), os.Getenv("SHIP_STATE"), []Target{{Provider: "sub", Kind: os.Getenv("SHIP_KIND"), To: os.Getenv("SHIP_TO")}})
	fmt.Printf("DONE %v\n", err)
	os.Exit(0)
}
