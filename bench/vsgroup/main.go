// Command vsgroup measures the exposure of vSphere VMs under their coffer
// snapshot (issue 41), VM by VM (`group: vm`) against one storage
// snapshot per datastore (`group: datastore`), with the job engine, the
// real vSphere connector and govmomi's vcsim in-process:
//
//	go run ./bench/vsgroup                     # 8 VMs, 500 ms snapshot tasks
//	go run ./bench/vsgroup -vms 8 -data 64MiB -delay 1000
//
// N VMs on one datastore, one flat disk each holding -data random bytes,
// snapshot create and remove slowed to -delay ms each (vcsim task-level
// delays, LockHandoff 0). Limits: 4 tasks, 4 per datastore. The storage
// provider is an exec script that copies the datastore's directory with
// cp --reflink=auto. By default (-xfs) the datastore is on a loop-mounted
// XFS with reflinks, so the copy is a clone, metadata only as an array's
// snapshot is (needs root); with -xfs=false it is in the temporary
// directory, where cp copies every byte while the batch's VMs wait.
//
// A VM's exposure is measured the same way in both modes, around the
// connector: from the end of its snapshot's creation to the end of its
// removal (Release in a group, Close VM by VM).
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/store/local"
)

const user, password = "coffer-backup@vsphere.local", "bench"

func main() {
	n := flag.Int("vms", 8, "VMs on the datastore")
	data := flag.String("data", "16MiB", "random bytes in each VM's disk")
	delay := flag.Int("delay", 500, "ms each snapshot create and remove task takes in vcsim")
	rounds := flag.Int("rounds", 2, "measured rounds; each runs both modes, in alternating order")
	xfs := flag.Bool("xfs", true, "put the simulated datastore on a loop-mounted XFS with reflinks (needs root), so the provider's copy is a clone")
	flag.Parse()
	size := benchutil.Size(*data)
	ctx := context.Background()
	where := "a directory of " + strings.TrimSpace(benchutil.Output("df", "--output=fstype", os.TempDir())[len("Type"):]) + " (cp copies every byte)"
	if *xfs {
		onXFS(int64(*n) * 4 * size)
		where = "XFS with reflinks (cp clones)"
	}
	simulator.TaskDelay.MethodDelay = map[string]int{"CreateSnapshotEx": *delay, "RemoveSnapshot": *delay, "LockHandoff": 0}
	lab := newLab(ctx, *n, size)
	benchutil.AtExit(lab.close)
	defer benchutil.Exit(0)

	fmt.Printf("%s\n%d VMs on one vcsim datastore in %s, %s of data each, snapshot create and remove %d ms each; limits: 4 tasks, 4 per datastore; full backups\n\n",
		benchutil.LoadAverage(), *n, where, *data, *delay)
	fmt.Println("| round | mode | job time | exposure per VM: min | median | max |")
	fmt.Println("|---|---|---|---|---|---|")
	med := map[string][]float64{}
	for round := range *rounds {
		order := []string{"vm", "datastore"}
		if round%2 == 1 {
			order = []string{"datastore", "vm"}
		}
		for _, group := range order {
			job, exp := lab.run(ctx, group)
			fmt.Printf("| %d | %s | %.1f s | %d ms | %d ms | %d ms |\n", round+1, map[string]string{"vm": "VM by VM", "datastore": "group (exec)"}[group],
				job.Seconds(), exp[0].Milliseconds(), exp[len(exp)/2].Milliseconds(), exp[len(exp)-1].Milliseconds())
			med[group] = append(med[group], float64(exp[len(exp)/2].Milliseconds()))
		}
	}
	ev, eg := median(med["vm"]), median(med["datastore"])
	fmt.Printf("\nmedian exposure over %d rounds: %.0f ms VM by VM, %.0f ms as a group (%.1fx less as a group)\n", *rounds, ev, eg, ev/eg)
}

// onXFS makes vcsim create its datastores (in os.TempDir) on a fresh
// loop-mounted XFS with reflinks, of room bytes and some.
func onXFS(room int64) {
	dir, err := os.MkdirTemp("", "coffer-bench-vsgroup-xfs-")
	benchutil.Check(err)
	benchutil.AtExit(func() { os.RemoveAll(dir) })
	img, mnt := filepath.Join(dir, "xfs.img"), filepath.Join(dir, "mnt")
	benchutil.Check(os.Mkdir(mnt, 0o755))
	f, err := os.Create(img)
	benchutil.Check(err)
	benchutil.Check(f.Truncate(3*room + 512<<20)) // sparse: the data, its copies in flight, the repository elsewhere
	benchutil.Check(f.Close())
	benchutil.Run("mkfs.xfs", "-q", "-m", "reflink=1", img)
	benchutil.Run("mount", "-o", "loop", img, mnt)
	benchutil.AtExit(func() { _ = exec.Command("umount", mnt).Run() })
	benchutil.Check(os.Setenv("TMPDIR", mnt))
}

type lab struct {
	model  *simulator.Model
	server *simulator.Server
	dir    string
	eng    *engine.Engine
	cat    *enginetest.Catalog
	conn   *exposure
	vms    int
}

func newLab(ctx context.Context, vms int, data int64) *lab {
	m := simulator.VPX()
	m.Host, m.Cluster, m.ClusterHost, m.Datastore, m.Machine, m.Autostart = 0, 1, 1, 1, 0, false
	benchutil.Check(m.Create())
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{User: url.UserPassword(user, password)}
	l := &lab{model: m, server: m.Service.NewServer(), vms: vms}
	l.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	var err error
	l.dir, err = os.MkdirTemp("", "coffer-bench-vsgroup-")
	benchutil.Check(err)
	sdk := &url.URL{Scheme: l.server.URL.Scheme, Host: l.server.URL.Host, Path: l.server.URL.Path}
	dsName, dsDir := createVMs(ctx, sdk, vms, data)
	c, err := vsphere.New(ctx, vsphere.Config{URL: sdk.String(), User: user, Password: password,
		Thumbprint: soap.ThumbprintSHA256(l.server.Certificate()), StateDir: filepath.Join(l.dir, "state"),
		TaskPoll: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler), ReadFrom: vsphere.ReadFromVCenter})
	benchutil.Check(err)
	l.conn = &exposure{Connector: c, took: map[string]time.Duration{}}
	providers := policy.StorageSnapshots{{Name: "array", Kind: "exec", Connections: []string{"vc"},
		Datastores: []string{policy.VSphereDatastore(dsName)}, Command: []string{writeScript(l.dir, dsName, dsDir)}}}
	st, err := local.Create(filepath.Join(l.dir, "repo"))
	benchutil.Check(err)
	_, err = repo.Init(ctx, st, repo.InitOptions{Password: []byte("pw"), KDF: repotest.FastKDF})
	benchutil.Check(err)
	r, err := repo.Open(ctx, st, []byte("pw"), repo.Options{})
	benchutil.Check(err)
	l.cat = enginetest.NewCatalog()
	l.eng, err = engine.New(ctx, engine.Options{Config: &policy.Config{Limits: policy.Limits{Tasks: 4, PerDatastore: 4}, StorageSnapshots: providers},
		Catalog: l.cat, Connectors: map[string]hypervisor.Connector{"vc": l.conn},
		StorageSnapshotters: storagesnap.For(providers, filepath.Join(l.dir, "state"), nil),
		OpenRepository:      func(context.Context, string) (*repo.Repository, error) { return r, nil }})
	benchutil.Check(err)
	return l
}

func (l *lab) close() {
	if l.eng != nil {
		l.eng.Close()
	}
	l.server.Close()
	l.model.Remove()
	os.RemoveAll(l.dir)
}

// run backs every VM up in full, VM by VM or as a group, and returns the
// job time and each VM's exposure, sorted.
func (l *lab) run(ctx context.Context, group string) (time.Duration, []time.Duration) {
	l.conn.reset()
	res, err := l.eng.Run(ctx, policy.Policy{Name: "bench-" + group, Connection: "vc", Group: group, Mode: "full"})
	benchutil.Check(err)
	if res.Job.Status != catalog.StatusSuccess {
		benchutil.Fatalf("%s: %s %s %+v", group, res.Job.Status, res.Job.Error, res.Failed())
	}
	exp := l.conn.exposures()
	if len(exp) != l.vms {
		benchutil.Fatalf("%s: %d exposures measured for %d VMs", group, len(exp), l.vms)
	}
	return res.Job.FinishedAt.Sub(res.Job.StartedAt), exp
}

// exposure times each VM from the end of its snapshot's creation to the
// end of its removal, whichever of Release and Close removes it.
type exposure struct {
	hypervisor.Connector
	mu   sync.Mutex
	took map[string]time.Duration
}

func (e *exposure) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.took = map[string]time.Duration{}
}

func (e *exposure) exposures() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []time.Duration
	for _, d := range e.took {
		out = append(out, d)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

func (e *exposure) Snapshot(ctx context.Context, vm hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	s, err := e.Connector.Snapshot(ctx, vm, req)
	if err != nil {
		return nil, err
	}
	return &timedSession{Session: s, e: e, vm: vm.ID, created: time.Now()}, nil
}

type timedSession struct {
	hypervisor.Session
	e       *exposure
	vm      string
	created time.Time
	once    sync.Once
}

func (s *timedSession) removed() {
	s.once.Do(func() {
		s.e.mu.Lock()
		s.e.took[s.vm] = time.Since(s.created)
		s.e.mu.Unlock()
	})
}

func (s *timedSession) Release(ctx context.Context) error {
	err := s.Session.Release(ctx)
	if err == nil {
		s.removed()
	}
	return err
}

func (s *timedSession) Close(ctx context.Context, ok bool) (map[string]string, error) {
	tokens, err := s.Session.Close(ctx, ok)
	if err == nil {
		s.removed()
	}
	return tokens, err
}

// writeScript writes the exec provider: it copies the datastore's
// directory into <dir>/snaps/<label> and presents that copy.
func writeScript(dir, dsName, dsDir string) string {
	snaps := filepath.Join(dir, "snaps")
	benchutil.Check(os.MkdirAll(snaps, 0o755))
	script := filepath.Join(dir, "array.sh")
	body := fmt.Sprintf(`#!/bin/sh
set -eu
snaps=%q
test "$COFFER_DATASTORE" = %q
case "$1" in
create) mkdir "$snaps/$COFFER_LABEL"; cp -a --reflink=auto %q/. "$snaps/$COFFER_LABEL/" ;;
present) echo "$snaps/$COFFER_LABEL" ;;
list) ls "$snaps" ;;
delete) rm -rf "$snaps/$COFFER_LABEL" ;;
*) exit 3 ;;
esac
`, snaps, policy.VSphereDatastore(dsName), dsDir)
	benchutil.Check(os.WriteFile(script, []byte(body), 0o755))
	return script
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
