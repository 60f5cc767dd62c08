package qemu

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
)

// bitmapInfo is one dirty bitmap as query-block reports it.
type bitmapInfo struct {
	Name         string `json:"name"`
	Recording    bool   `json:"recording"`
	Persistent   bool   `json:"persistent"`
	Busy         bool   `json:"busy"`
	Inconsistent bool   `json:"inconsistent"`
	Count        int64  `json:"count"`
}

// blockDisk is one guest disk.
type blockDisk struct {
	ID       string // device id, the disk key ("vda")
	QdevPath string // QOM path whose "drive" property fleecing switches
	Node     string // root block node of the device
	Format   string
	File     string
	Size     int64
	Bitmaps  []bitmapInfo
}

// vmInfo is what one monitor tells about its VM.
type vmInfo struct {
	Socket    string
	Name      string
	UUID      string
	Status    string
	MemoryMiB int64
	CPUs      int
	PID       int
	CmdLine   []string
	Disks     []blockDisk
	// Daemon marks a qemu-storage-daemon (see daemon.go).
	Daemon bool
}

func queryVM(ctx context.Context, cl *qmp.Client, sock string) (*vmInfo, error) {
	info := &vmInfo{Socket: sock}
	var name struct {
		Name string `json:"name"`
	}
	if err := cl.Execute(ctx, "query-name", nil, &name); err != nil {
		if qmp.IsClass(err, "CommandNotFound") {
			// No machine: a qemu-storage-daemon, whose disks are exports.
			return queryDaemon(ctx, cl, sock)
		}
		return nil, err
	}
	var uuid struct {
		UUID string `json:"UUID"`
	}
	if err := cl.Execute(ctx, "query-uuid", nil, &uuid); err != nil {
		return nil, err
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := cl.Execute(ctx, "query-status", nil, &st); err != nil {
		return nil, err
	}
	var mem struct {
		Base int64 `json:"base-memory"`
	}
	if err := cl.Execute(ctx, "query-memory-size-summary", nil, &mem); err != nil {
		return nil, err
	}
	var cpus []json.RawMessage
	if err := cl.Execute(ctx, "query-cpus-fast", nil, &cpus); err != nil {
		return nil, err
	}
	info.Name, info.Status, info.MemoryMiB, info.CPUs = name.Name, st.Status, mem.Base>>20, len(cpus)
	if uuid.UUID != "" && uuid.UUID != "00000000-0000-0000-0000-000000000000" {
		info.UUID = uuid.UUID
	}
	if info.Name == "" {
		info.Name = sock
	}
	info.PID = cl.PeerPID()
	info.CmdLine = processCmdline(info.PID)
	disks, err := queryDisks(ctx, cl)
	if err != nil {
		return nil, err
	}
	info.Disks = disks
	return info, nil
}

// processCmdline is the command line of a local process, nil if unknown.
func processCmdline(pid int) []string {
	if pid <= 0 {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func queryDisks(ctx context.Context, cl *qmp.Client) ([]blockDisk, error) {
	var blocks []struct {
		Device   string     `json:"device"`
		Qdev     string     `json:"qdev"`
		Inserted *blockNode `json:"inserted"`
	}
	if err := cl.Execute(ctx, "query-block", nil, &blocks); err != nil {
		return nil, err
	}
	var out []blockDisk
	for _, b := range blocks {
		in := b.Inserted
		if in == nil || in.RO {
			continue // empty drives and read-only media (CD-ROMs) are not backed up
		}
		id := deviceID(b.Device, b.Qdev)
		if id == "" {
			id = in.Name
		}
		out = append(out, blockDisk{
			ID: id, QdevPath: b.Qdev, Node: in.Name, Format: in.Image.Format,
			File: in.Image.Filename, Size: in.Image.VirtualSize, Bitmaps: in.Bitmaps,
		})
	}
	return out, nil
}

// deviceID is a disk's key: the id of its guest device (the QOM path's
// peripheral name), else its drive's name.
func deviceID(device, qdev string) string {
	if i := strings.Index(qdev, "/peripheral/"); i >= 0 {
		return strings.SplitN(qdev[i+len("/peripheral/"):], "/", 2)[0]
	}
	return device
}

// bitmap returns the named bitmap of d, if present.
func (d *blockDisk) bitmap(name string) (bitmapInfo, bool) {
	for _, b := range d.Bitmaps {
		if b.Name == name {
			return b, true
		}
	}
	return bitmapInfo{}, false
}

func (v *vmInfo) id() string {
	if v.Daemon {
		return daemonIDPrefix + v.Socket
	}
	if v.UUID != "" {
		return v.UUID
	}
	return v.Name
}

func (v *vmInfo) inventory(host string) hypervisor.VM {
	vm := hypervisor.VM{
		VMRef: hypervisor.VMRef{ID: v.id(), Name: v.Name}, Host: host,
		Tags: map[string]string{"qmp-socket": v.Socket}, PowerState: powerState(v.Status), ChangeTracking: true,
	}
	if v.Daemon {
		vm.Tags["qemu-role"] = "storage-daemon"
	}
	for _, d := range v.Disks {
		vm.Disks = append(vm.Disks, d.info())
		ds := datastoreOf(d.File)
		if !contains(vm.Datastores, ds) {
			vm.Datastores = append(vm.Datastores, ds)
		}
		if len(d.coferBitmaps()) == 0 {
			vm.ChangeTracking = false
		}
	}
	return vm
}

func (d *blockDisk) info() hypervisor.DiskInfo {
	return hypervisor.DiskInfo{Key: d.ID, Name: d.ID, Size: d.Size, Datastore: datastoreOf(d.File), Path: d.File, Format: d.Format}
}

// coferBitmaps lists coffer's bitmaps on the disk.
func (d *blockDisk) coferBitmaps() []bitmapInfo {
	var out []bitmapInfo
	for _, b := range d.Bitmaps {
		if strings.HasPrefix(b.Name, bitmapPrefix) {
			out = append(out, b)
		}
	}
	return out
}

// datastoreOf names the storage a disk file lives on: its directory, the
// QEMU equivalent of a datastore for the job engine's per-datastore limits.
func datastoreOf(file string) string {
	if i := strings.LastIndex(file, "/"); i > 0 {
		return file[:i]
	}
	return file
}

func powerState(s string) string {
	switch s {
	case "running":
		return "running"
	case "paused", "suspended", "io-error", "postmigrate", "prelaunch":
		return "paused"
	default:
		return s
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
