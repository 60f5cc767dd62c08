package main

// -restore: a VM restore through today's path (one serial PUT of each
// disk's whole flat extent through the /folder service) against the
// ranged path (each disk hot-added to a data-mover VM and written in
// pieces of allocated data, the disks at once), in the same run, on the
// same simulator and the same point:
//
//	go run ./bench/vsphere -restore-disk 1GiB      # 2 disks of 1 GiB, the second 10% allocated
//	go run ./bench/vsphere -restore-disk 256MiB
//
// vcsim attaches no real device, so the data mover's "device" for an
// attached disk is the disk's flat extent in the simulator's datastore
// directory, sized as the disk (as the tests do, hotadd_restore_test.go):
// both paths end in the same local files, one through HTTPS and vcsim's
// /folder handler, the other through pwrite. Bytes sent are what each
// path hands the target: the PUT bodies (the disk's size, holes as zeros)
// or the pieces written; allocated is what the target file takes on disk.
// The disks' source is generated in memory (the same for both paths), so
// that the figures are the write paths' alone, not the repository's.

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
)

const moverName = "coffer-mover"

// restoreBench runs the comparison for two disks of size bytes: the
// first fully allocated, the second a tenth.
func restoreBench(ctx context.Context, size int64) {
	f := newFleet(ctx, options{hosts: 1, datastores: 1, poll: 50 * time.Millisecond})
	defer f.close()
	sdk := &url.URL{Scheme: f.server.URL.Scheme, Host: f.server.URL.Host, Path: f.server.URL.Path}
	admin, err := govmomi.NewClient(ctx, &url.URL{Scheme: sdk.Scheme, Host: sdk.Host, Path: sdk.Path,
		User: url.UserPassword(user, password)}, true)
	if err != nil {
		log.Fatal(err)
	}
	ds, dsDir := createMover(ctx, admin)
	cfg := hypervisor.VMConfig{Kind: "vsphere", Name: "web-1", CPUs: 1, MemoryMiB: 256}
	srcs := []synthSource{{size: size, ext: []hypervisor.Extent{{Offset: 0, Length: size}}}, {size: size, seed: 1}}
	for off := int64(0); off < size; off += 10 << 20 { // 1 MiB in every 10 MiB
		srcs[1].ext = append(srcs[1].ext, hypervisor.Extent{Offset: off, Length: min(1<<20, size-off)})
	}
	data := int64(0)
	for i, s := range srcs {
		cfg.Disks = append(cfg.Disks, hypervisor.DiskInfo{Key: strconv.Itoa(2000 + i), Name: fmt.Sprintf("Hard disk %d", i+1), Size: size, Datastore: ds})
		for _, e := range s.ext {
			data += e.Length
		}
	}
	ranged, err := vsphere.New(ctx, vsphere.Config{URL: sdk.String(), User: user, Password: password,
		Thumbprint: soap.ThumbprintSHA256(f.server.Certificate()), StateDir: f.state, TaskPoll: f.o.poll,
		ReadFrom: vsphere.ReadFromVCenter, DataMoverVM: moverName, MoverDevices: simDevices{dsDir: dsDir}})
	if err != nil {
		log.Fatal(err)
	}
	defer ranged.Close(ctx)
	fmt.Printf("VM with 2 disks of %d MiB: disk 1 fully allocated, disk 2 10%% allocated; %d MiB of data in all; %d cores\n\n",
		size>>20, data>>20, numCPU())
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\twall\tbytes sent\tsent / data\tallocated on target\tallocated / data\t")
	today := runRestore(ctx, f.conn, cfg, srcs, "today", dsDir, data)
	today.print(tw)
	now := runRestore(ctx, ranged, cfg, srcs, "ranged", dsDir, data)
	now.print(tw)
	tw.Flush()
	fmt.Printf("\nranged vs today: wall %.2fx, bytes sent %.2fx\n", float64(now.wall)/float64(today.wall), float64(now.sent)/float64(today.sent))
	for i := range srcs {
		a, _ := os.ReadFile(filepath.Join(dsDir, "today", fmt.Sprintf("today_%d-flat.vmdk", i)))
		b, _ := os.ReadFile(filepath.Join(dsDir, "ranged", fmt.Sprintf("ranged_%d-flat.vmdk", i)))
		if !bytes.Equal(a, b) || int64(len(a)) != size {
			log.Fatalf("disk %d: the two restores differ", i)
		}
	}
	fmt.Println("both restores hold the same bytes")
}

type restoreRun struct {
	name              string
	wall              time.Duration
	sent, alloc, data int64
}

func (r restoreRun) print(tw *tabwriter.Writer) {
	fmt.Fprintf(tw, "%s\t%s\t%d\t%.3fx\t%d\t%.3fx\t\n", r.name, round(r.wall), r.sent, float64(r.sent)/float64(r.data),
		r.alloc, float64(r.alloc)/float64(r.data))
}

// runRestore restores cfg as VM name through c the way restore vm does:
// the disks at once where the VM takes them so, else one after another.
func runRestore(ctx context.Context, c *vsphere.Connector, cfg hypervisor.VMConfig, srcs []synthSource, name, dsDir string, data int64) restoreRun {
	start := time.Now()
	nv, err := c.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: name, Point: "bench"})
	if err != nil {
		log.Fatal(err)
	}
	var g errgroup.Group
	if p, ok := nv.(hypervisor.ParallelWriter); !ok || !p.ParallelDisks() {
		g.SetLimit(1)
	}
	for i, d := range cfg.Disks {
		g.Go(func() error { return nv.WriteDisk(ctx, d.Key, srcs[i]) })
	}
	if err := g.Wait(); err != nil {
		log.Fatal(err)
	}
	if cp, ok := nv.(hypervisor.Completer); ok {
		if err := cp.Complete(ctx); err != nil {
			log.Fatal(err)
		}
	}
	r := restoreRun{name: name, wall: time.Since(start), data: data}
	if st, ok := nv.(interface{ RestoreStats() ranged.Stats }); ok && st.RestoreStats().Written > 0 {
		r.sent = st.RestoreStats().Written
	} else {
		for _, d := range cfg.Disks { // one PUT of the whole extent each
			r.sent += d.Size
		}
	}
	for i := range cfg.Disks {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dsDir, name, fmt.Sprintf("%s_%d-flat.vmdk", name, i)), &st); err != nil {
			log.Fatal(err)
		}
		r.alloc += st.Blocks * 512
	}
	return r
}

// synthSource is a disk generated on the fly: ext hold data, the rest
// is zeros.
type synthSource struct {
	size int64
	ext  []hypervisor.Extent
	seed byte
}

func (s synthSource) Size() int64                    { return s.size }
func (s synthSource) Allocated() []hypervisor.Extent { return s.ext }

func (s synthSource) ReadAt(p []byte, off int64) (int, error) {
	clear(p)
	for _, e := range s.ext {
		lo, hi := max(off, e.Offset), min(off+int64(len(p)), e.Offset+e.Length)
		for i := lo; i < hi; i++ {
			p[i-off] = byte(i>>9) ^ byte(i) | 1 ^ s.seed
		}
	}
	return len(p), nil
}

// createMover creates the data-mover VM (a pvscsi controller to attach
// disks to) and returns the datastore and its directory.
func createMover(ctx context.Context, c *govmomi.Client) (string, string) {
	fd := find.NewFinder(c.Client, true)
	dc, err := fd.DefaultDatacenter(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fd.SetDatacenter(dc)
	folders, _ := dc.Folders(ctx)
	pool, err := fd.DefaultResourcePool(ctx)
	if err != nil {
		log.Fatal(err)
	}
	ds, err := fd.DefaultDatastore(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var m mo.Datastore
	if err := ds.Properties(ctx, ds.Reference(), []string{"summary"}, &m); err != nil {
		log.Fatal(err)
	}
	u, _ := url.Parse(m.Summary.Url)
	var devs object.VirtualDeviceList
	scsi, _ := devs.CreateSCSIController("pvscsi")
	spec := types.VirtualMachineConfigSpec{Name: moverName, GuestId: string(types.VirtualMachineGuestOsIdentifierOtherGuest64),
		NumCPUs: 1, MemoryMB: 256, Files: &types.VirtualMachineFileInfo{VmPathName: "[" + ds.Name() + "]"}}
	spec.DeviceChange, _ = object.VirtualDeviceList{scsi}.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	task, err := folders.VmFolder.CreateVM(ctx, spec, pool, nil)
	if err == nil {
		_, err = task.WaitForResult(ctx)
	}
	if err != nil {
		log.Fatal(err)
	}
	return ds.Name(), u.Path
}

// simDevices is the data mover's OS on the simulator: the flat extent of
// the attached disk, sized as its descriptor says (vcsim creates it
// empty; the truncation allocates nothing).
type simDevices struct{ dsDir string }

var rwSectors = regexp.MustCompile(`(?m)^RW (\d+) `)

func (d simDevices) Device(_ context.Context, a vsphere.AttachedDisk) (string, error) {
	_, path, _ := strings.Cut(a.File, "] ")
	desc, err := os.ReadFile(filepath.Join(d.dsDir, path))
	if err != nil {
		return "", err
	}
	m := rwSectors.FindSubmatch(desc)
	if m == nil {
		return "", fmt.Errorf("descriptor of %s names no size", a.File)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	flat := filepath.Join(d.dsDir, strings.TrimSuffix(path, ".vmdk")+"-flat.vmdk")
	return flat, os.Truncate(flat, n*512)
}
