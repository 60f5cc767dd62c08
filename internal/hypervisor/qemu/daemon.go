package qemu

// qemu-storage-daemon (QSD) serves disks without a guest: its block nodes
// reach their users through block exports (a writable NBD export,
// vhost-user-blk in production), so it has no device to switch to a
// copy-before-write filter, no name, no UUID and no run state. coffer
// protects one QSD instance like one VM:
//
//   - Discovery: a monitor without query-name is a QSD; its disks are the
//     read-write block nodes under its exports (query-block-exports +
//     query-named-block-nodes), keyed by export ID (the lowest one when
//     several exports share a node). Identity: the name is the QMP
//     socket's file name ("db-3.qmp" → "db-3"; "qmp.sock" → its
//     directory's name), the ID "qsd:" + the socket path. Moving the
//     socket therefore starts a new backup chain.
//   - Snapshot: the job-based fleecing (a temporary qcow2 overlay backed by
//     the disk's node + blockdev-backup sync=none, which inserts the
//     copy-before-write filter above the node and moves every export onto
//     it) in the SAME transaction as the dirty-bitmap hand-over: one atomic
//     instant for all disks, incremental and differential as for VMs.
//   - The overlay is exported read-only over the daemon's own NBD server
//     (one per QEMU process) when it has one, else over coffer's.
//
// Production safety differs from the VM path: QEMU 7.2's blockdev-backup
// has no on-cbw-error, so when the fleecing overlay cannot grow (its file
// system is full) the copy-before-write fails the WRITER's write (the NBD
// or vhost-user client sees an I/O error) instead of breaking the
// snapshot. Put state-dir/qemu/fleece on space that can hold the disks'
// rewrite rate for a backup's duration. (coffer has no fleecing size limit
// on either path: the VM path's only bound is the same space.)

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
)

const daemonIDPrefix = "qsd:"

// blockNode is QEMU's BlockDeviceInfo: one node as query-named-block-nodes
// reports it, and a drive's medium in query-block ("inserted").
type blockNode struct {
	Name    string       `json:"node-name"`
	Drv     string       `json:"drv"`
	File    string       `json:"file"`
	RO      bool         `json:"ro"`
	Bitmaps []bitmapInfo `json:"dirty-bitmaps"`
	Image   struct {
		VirtualSize int64  `json:"virtual-size"`
		Format      string `json:"format"`
		Filename    string `json:"filename"`
	} `json:"image"`
}

func queryNodes(ctx context.Context, cl *qmp.Client) (map[string]blockNode, error) {
	var nodes []blockNode
	if err := cl.Execute(ctx, "query-named-block-nodes", map[string]any{"flat": true}, &nodes); err != nil {
		return nil, err
	}
	out := make(map[string]blockNode, len(nodes))
	for _, n := range nodes {
		out[n.Name] = n
	}
	return out, nil
}

// queryDaemon describes a qemu-storage-daemon as a VM without CPUs.
func queryDaemon(ctx context.Context, cl *qmp.Client, sock string) (*vmInfo, error) {
	info := &vmInfo{Socket: sock, Name: daemonName(sock), Status: "running", Daemon: true}
	info.PID = cl.PeerPID()
	info.CmdLine = processCmdline(info.PID)
	disks, err := queryExportedDisks(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(disks) == 0 {
		return nil, fmt.Errorf("%w: %s has neither guest devices nor writable block exports", hypervisor.ErrNotFound, sock)
	}
	info.Disks = disks
	return info, nil
}

// daemonName names a storage daemon after its monitor socket.
func daemonName(sock string) string {
	dir, base := filepath.Split(filepath.Clean(sock))
	if base == "qmp.sock" {
		return filepath.Base(dir)
	}
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// queryExportedDisks lists the nodes under the daemon's block exports.
// query-block-exports does not say whether an export is writable, so a
// node opened read-write stands for "written through an export"; read-only
// nodes are skipped like CD-ROMs on the VM path.
func queryExportedDisks(ctx context.Context, cl *qmp.Client) ([]blockDisk, error) {
	var exports []struct {
		ID   string `json:"id"`
		Node string `json:"node-name"`
	}
	if err := cl.Execute(ctx, "query-block-exports", nil, &exports); err != nil {
		return nil, err
	}
	nodes, err := queryNodes(ctx, cl)
	if err != nil {
		return nil, err
	}
	sort.Slice(exports, func(i, j int) bool { return exports[i].ID < exports[j].ID })
	seen := map[string]bool{}
	var out []blockDisk
	for _, e := range exports {
		n, ok := nodes[e.Node]
		if !ok || strings.HasPrefix(e.ID, bitmapPrefix) || seen[e.Node] {
			continue // coffer's own snapshot exports, or a second export of a disk
		}
		if n.Drv == "copy-before-write" {
			// The export moved onto a backup job's filter: another coffer's
			// session runs, or a killed one left it (CleanupLeftovers).
			return nil, fmt.Errorf("%w: export %s is under a copy-before-write filter (%s) of a running or abandoned backup", hypervisor.ErrTransient, e.ID, e.Node)
		}
		if n.RO {
			continue
		}
		seen[e.Node] = true
		format := n.Drv
		if format == "file" || format == "host_device" {
			format = "raw" // an export straight on the protocol node
		}
		out = append(out, blockDisk{ID: e.ID, Node: e.Node, Format: format, File: n.File, Size: n.Image.VirtualSize, Bitmaps: n.Bitmaps})
	}
	return out, nil
}

// daemonDisk is the current state of one node of a storage daemon.
func daemonDisk(ctx context.Context, cl *qmp.Client, node string) (*blockDisk, error) {
	nodes, err := queryNodes(ctx, cl)
	if err != nil {
		return nil, err
	}
	n, ok := nodes[node]
	if !ok {
		return nil, nil
	}
	return &blockDisk{ID: node, Node: node, Bitmaps: n.Bitmaps}, nil
}

// planDaemonDisk adapts a disk's plan to job-based fleecing: a backup job
// instead of a device switch, its filter named like coffer's other nodes
// so that every object coffer creates carries the coffer- prefix.
func planDaemonDisk(jd *journalDisk) {
	jd.SnapNode = ""
	if jd.FleeceNode == "" {
		jd.CBWNode = "" // as-is: nothing inserted
		return
	}
	jd.Job = strings.TrimSuffix(jd.FleeceNode, "-fl") + "-job"
}

// snapshotDaemon is the storage daemon's snapshot instant: overlays are
// prepared, then one transaction hands the bitmaps over and starts every
// disk's backup job. QEMU drains all I/O around a transaction, so each
// write lands wholly before the instant (in the image and in the bitmaps)
// or wholly after it (copied to the overlay first, and in the new bitmap).
func (s *session) snapshotDaemon(ctx context.Context) error {
	switch s.req.Mode {
	case hypervisor.Quiesced:
		why := "a qemu-storage-daemon has no guest to quiesce"
		if s.req.Quiesce == hypervisor.QuiesceRequired {
			return fmt.Errorf("%w: %s", hypervisor.ErrQuiesceFailed, why)
		}
		s.warnings = append(s.warnings, why+"; the backup is crash-consistent")
	case hypervisor.Suspend:
		s.warnings = append(s.warnings, "a qemu-storage-daemon has no guest to pause; the backup is crash-consistent")
	}
	s.achieved = s.plainMode() // with-memory was refused before
	actions := s.bitmapActions()
	if s.req.Mode != hypervisor.AsIs {
		for _, d := range s.j.Disks {
			out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", d.FleeceFile, strconv.FormatInt(d.Size, 10)).CombinedOutput()
			if err != nil {
				return fmt.Errorf("qemu: create fleecing image: %v: %s", err, out)
			}
			// Backed by the disk: what was not copied before a write reads
			// through from the disk, which has not changed there.
			if err := s.cl.Execute(ctx, "blockdev-add", map[string]any{
				"driver": "qcow2", "node-name": d.FleeceNode, "backing": d.Node,
				"file": map[string]any{"driver": "file", "filename": d.FleeceFile},
			}, nil); err != nil {
				return err
			}
			actions = append(actions, map[string]any{"type": "blockdev-backup", "data": map[string]any{
				"job-id": d.Job, "device": d.Node, "target": d.FleeceNode, "sync": "none", "filter-node-name": d.CBWNode,
			}})
		}
	}
	if len(actions) == 0 {
		return nil
	}
	return s.cl.Execute(ctx, "transaction", map[string]any{"actions": actions}, nil)
}

// cancelBackupJob ends a fleecing job and waits until it is gone: until
// then it holds the overlay and its filter stays above the disk.
func cancelBackupJob(ctx context.Context, cl *qmp.Client, job string) error {
	var jobs []struct {
		Device string `json:"device"`
	}
	if err := cl.Execute(ctx, "query-block-jobs", nil, &jobs); err != nil {
		return err
	}
	found := false
	for _, j := range jobs {
		found = found || j.Device == job
	}
	if !found {
		return nil
	}
	// A fresh subscription: the teardown's own may have overflowed with the
	// JOB_STATUS_CHANGE events every drain produces.
	sub := cl.Subscribe()
	defer sub.Cancel()
	if err := cl.Execute(ctx, "block-job-cancel", map[string]any{"device": job}, nil); err != nil {
		return err
	}
	for {
		// A sync=none job ends cancelled; one that failed meanwhile ends
		// completed (with an error): gone either way.
		ev, err := sub.Wait(ctx, "", qmp.FieldIs("device", job))
		if err != nil {
			return err
		}
		if ev.Name == "BLOCK_JOB_CANCELLED" || ev.Name == "BLOCK_JOB_COMPLETED" {
			return nil
		}
	}
}

// daemonNBDServer finds the NBD server a storage daemon was started with
// (--nbd-server): QEMU runs one per process, so coffer exports its
// snapshots there, read-only and named coffer-*. found is false when the
// daemon has none (coffer then starts its own, as for VMs).
func daemonNBDServer(cmdline []string) (network, addr string, found bool, err error) {
	for i, a := range cmdline {
		var val string
		switch {
		case a == "--nbd-server" && i+1 < len(cmdline):
			val = cmdline[i+1]
		case strings.HasPrefix(a, "--nbd-server="):
			val = strings.TrimPrefix(a, "--nbd-server=")
		default:
			continue
		}
		get := func(k string) string { return parseOpts(val).get(k) }
		if strings.HasPrefix(strings.TrimSpace(val), "{") {
			var v struct {
				Addr struct {
					Type string `json:"type"`
					Path string `json:"path"`
					Host string `json:"host"`
					Port string `json:"port"`
				} `json:"addr"`
				TLS string `json:"tls-creds"`
			}
			if err := json.Unmarshal([]byte(val), &v); err != nil {
				return "", "", false, fmt.Errorf("qemu: --nbd-server %q: %w", val, err)
			}
			m := map[string]string{"addr.type": v.Addr.Type, "addr.path": v.Addr.Path, "addr.host": v.Addr.Host, "addr.port": v.Addr.Port, "tls-creds": v.TLS}
			get = func(k string) string { return m[k] }
		}
		if get("tls-creds") != "" {
			return "", "", true, fmt.Errorf("%w: the storage daemon's NBD server requires TLS", hypervisor.ErrUnsupported)
		}
		switch get("addr.type") {
		case "unix":
			return "unix", get("addr.path"), true, nil
		case "inet":
			return "tcp", net.JoinHostPort(get("addr.host"), get("addr.port")), true, nil
		default:
			return "", "", true, fmt.Errorf("%w: NBD server address type %q", hypervisor.ErrUnsupported, get("addr.type"))
		}
	}
	return "", "", false, nil
}
