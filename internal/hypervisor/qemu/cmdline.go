package qemu

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// LaunchDisk says where a recorded disk lives in a relaunched VM.
type LaunchDisk struct {
	Path   string
	Format string // "raw" or "qcow2"
}

// LaunchSpec describes how to turn a backed-up VM's recorded command line
// into one for a new QEMU process: restore to a new VM, or instant
// recovery from an overlay whose backing file is coffer's NBD server.
type LaunchSpec struct {
	// Dir receives the monitor and chardev sockets, the pid file and the
	// serial console log.
	Dir  string
	Name string
	UUID string
	// Disks maps disk keys ("vda") to their new files. Every recorded disk
	// must be listed: a relaunched VM never opens the original's files.
	Disks map[string]LaunchDisk
	// StopOnError makes the disks' devices pause the VM on I/O errors
	// (rerror/werror=stop) instead of passing them to the guest: an
	// instant-recovery VM whose NBD server went away waits for it.
	StopOnError bool
	// Incoming starts the VM waiting for its saved memory state (see
	// LoadMemory) instead of booting.
	Incoming bool
	// NewMAC gives every NIC a new locally administered MAC so a restored
	// copy can share a network with the original.
	NewMAC func() string
}

// QMPPath is where the relaunched VM's coffer monitor listens.
func (s LaunchSpec) QMPPath() string { return filepath.Join(s.Dir, "qmp.sock") }

// ConsolePath is the file the relaunched VM's first serial port writes to.
func (s LaunchSpec) ConsolePath() string { return filepath.Join(s.Dir, "console.log") }

// PIDPath is QEMU's pid file.
func (s LaunchSpec) PIDPath() string { return filepath.Join(s.Dir, "qemu.pid") }

// droppedOptions are options of the original process that make no sense
// for a relaunch (its own daemonizing, pid file, monitors we replace,
// incoming migration, internal snapshots).
var droppedOptions = map[string]bool{"-daemonize": true, "-pidfile": true, "-qmp": true, "-monitor": true,
	"-incoming": true, "-loadvm": true, "-snapshot": true, "-nographic": true}

// Relaunch is a rewritten command line.
type Relaunch struct {
	Args []string
	// Nodes lists each disk's block nodes named on the command line,
	// format node first (empty for -drive disks, whose nodes QEMU names).
	Nodes map[string][]string
	// Warnings say what of the original could not be kept (a network
	// passed as file descriptors).
	Warnings []string
}

// Relaunchable says whether a point's recorded configuration describes a VM
// RelaunchArgs can start again: a command line of a QEMU guest, not of a
// qemu-storage-daemon (which has no guest to recreate).
func Relaunchable(native []byte) error {
	var nc nativeConfig
	if err := json.Unmarshal(native, &nc); err != nil || len(nc.CmdLine) == 0 {
		return fmt.Errorf("qemu: the backup point has no recorded command line (was it taken by the qemu connector?)")
	}
	if strings.Contains(filepath.Base(nc.CmdLine[0]), "storage-daemon") {
		return fmt.Errorf("qemu: the backup point is of a qemu-storage-daemon, which has no guest to recreate: restore its disks with `coffer restore`: %w", hypervisor.ErrUnsupported)
	}
	return nil
}

// RelaunchArgs rewrites the command line recorded at backup time
// (hypervisor.VMConfig.Native) for spec. It only edits what identifies
// the original (disk files, sockets, name, UUID, MACs) and keeps the
// machine (CPU, memory, devices, firmware, kernel) exactly as recorded.
//
// Hand-written: no library models QEMU's option syntax; the edits are
// confined to the few options that name files and sockets.
func RelaunchArgs(native []byte, spec LaunchSpec) (*Relaunch, error) {
	if err := Relaunchable(native); err != nil {
		return nil, err
	}
	var nc nativeConfig
	_ = json.Unmarshal(native, &nc)
	byNode := map[string]blockDisk{}
	byFile := map[string]blockDisk{}
	for _, d := range nc.Disks {
		if _, ok := spec.Disks[d.ID]; !ok {
			return nil, fmt.Errorf("qemu: no new file given for disk %s", d.ID)
		}
		byNode[d.Node], byFile[d.File] = d, d
	}
	bin := nc.CmdLine[0]
	if _, err := exec.LookPath(bin); err != nil {
		bin = "qemu-system-x86_64"
	}
	out := []string{bin}
	// fileNodes maps a format node's file child to the disk it belongs to;
	// filled from the format nodes first, applied to the file nodes after.
	fileNodes := map[string]blockDisk{}
	serial := false
	nodes := map[string][]string{}
	var warnings []string
	args := nc.CmdLine[1:]
	for i := 0; i < len(args); i++ {
		opt := args[i]
		val, hasVal := "", i+1 < len(args) && !strings.HasPrefix(opt, "--") && takesValue(opt)
		if hasVal {
			i++
			val = args[i]
		}
		if droppedOptions[opt] {
			continue
		}
		switch opt {
		case "-add-fd":
			continue // the original's inherited descriptors: not this process's
		case "-netdev":
			var warn string
			if val, warn = rewriteNetdev(val); warn != "" {
				warnings = append(warnings, warn)
			}
		case "-name":
			val = spec.Name
		case "-uuid":
			val = spec.UUID
		case "-serial":
			val = "file:" + spec.ConsolePath()
			if serial {
				val = "null" // only the first serial port is logged
			}
			serial = true
		case "-chardev":
			val = rewriteChardev(val, spec.Dir)
		case "-blockdev":
			o := parseBlockdev(val)
			if d, ok := byNode[o.get("node-name")]; ok {
				ld := spec.Disks[d.ID]
				o.set("driver", ld.Format)
				if ld.Format != d.Format {
					o.keepOnly("driver", "node-name", "file", "discard", "detect-zeroes", "cache.direct", "cache.no-flush", "read-only", "auto-read-only")
				}
				fileNodes[o.get("file")] = d
				nodes[d.ID] = []string{d.Node, o.get("file")}
			}
			val = o.String()
		case "-drive":
			o := parseOpts(val)
			if d, ok := byFile[o.get("file")]; ok {
				ld := spec.Disks[d.ID]
				o.set("file", ld.Path)
				o.set("format", ld.Format)
				if spec.StopOnError {
					o.set("rerror", "stop")
					o.set("werror", "stop")
				}
			}
			val = o.String()
		case "-device":
			o := parseOpts(val)
			if _, ok := byNode[o.get("drive")]; ok && spec.StopOnError {
				o.set("rerror", "stop")
				o.set("werror", "stop")
			}
			if o.has("mac") && spec.NewMAC != nil {
				o.set("mac", spec.NewMAC())
			}
			val = o.String()
		}
		out = append(out, opt)
		if hasVal {
			out = append(out, val)
		}
	}
	// Second pass: point the disks' file nodes at the new files.
	for i := 1; i+1 < len(out); i++ {
		if out[i] != "-blockdev" {
			continue
		}
		o := parseBlockdev(out[i+1])
		if d, ok := fileNodes[o.get("node-name")]; ok {
			o.set("filename", spec.Disks[d.ID].Path)
			out[i+1] = o.String()
		}
	}
	out = append(out,
		"-chardev", "socket,id=coffer-relaunch-mon,path="+spec.QMPPath()+",server=on,wait=off",
		"-mon", "chardev=coffer-relaunch-mon,mode=control",
		"-pidfile", spec.PIDPath(), "-daemonize")
	if spec.Incoming {
		out = append(out, "-incoming", "defer")
	}
	if !serial {
		out = append(out, "-serial", "file:"+spec.ConsolePath())
	}
	return &Relaunch{Args: out, Nodes: nodes, Warnings: warnings}, nil
}

// rewriteNetdev replaces a network backend that the VM's manager passed
// as inherited file descriptors (libvirt's tap,fd=N and vhostfd=N, in
// QemuOpts or JSON form): a relaunched process has no such descriptors,
// and QEMU would refuse to start. The NIC keeps its backend's ID, so the
// device stays as recorded, on an isolated user-mode network: a restored
// copy must not reach the original's networks anyway.
func rewriteNetdev(val string) (string, string) {
	o := parseBlockdev(val)
	typ := o.get("type")
	if po, ok := o.(*opts); ok && typ == "" {
		typ = po.first()
	}
	if o.get("fd") == "" && o.get("fds") == "" && o.get("vhostfd") == "" && o.get("vhostfds") == "" {
		return val, ""
	}
	id := o.get("id")
	return "user,id=" + id + ",restrict=on", fmt.Sprintf("network backend %s (%s) was passed to the original as file descriptors "+
		"(by libvirt?), which a relaunch cannot have: it is an isolated user-mode network instead (restrict=on); attach it to a network by hand", id, typ)
}

// takesValue reports whether a QEMU option is followed by an argument.
// QEMU's boolean options are the exception, so they are listed.
func takesValue(opt string) bool {
	switch opt {
	case "-daemonize", "-nographic", "-snapshot", "-no-reboot", "-no-shutdown", "-nodefaults", "-S",
		"-enable-kvm", "-no-hpet", "-no-acpi", "-no-user-config", "-full-screen", "-s":
		return false
	}
	return strings.HasPrefix(opt, "-")
}

// rewriteChardev moves socket chardevs (passed as inherited fds or at the
// original's paths) to dir/ID.sock, so the relaunch neither needs the
// original's fds nor collides with its sockets.
func rewriteChardev(val, dir string) string {
	o := parseOpts(val)
	if o.first() != "socket" {
		return val
	}
	o.del("fd")
	o.del("host")
	o.del("port")
	o.set("path", filepath.Join(dir, o.get("id")+".sock"))
	o.set("server", "on")
	o.set("wait", "off")
	return o.String()
}

// opts is a QemuOpts string ("driver=file,filename=a,,b") as ordered
// key/value pairs; a leading bare word ("socket") has an empty key.
type opts []optKV

type optKV struct {
	k, v string
	bare bool // a value without key=, like "socket" in "socket,id=m"
}

func parseOpts(s string) opts {
	var out opts
	var cur strings.Builder
	flush := func() {
		f := cur.String()
		cur.Reset()
		if k, v, ok := strings.Cut(f, "="); ok {
			out = append(out, optKV{k: k, v: v})
		} else {
			out = append(out, optKV{v: f, bare: true})
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			if i+1 < len(s) && s[i+1] == ',' { // ",," escapes a comma
				cur.WriteByte(',')
				i++
				continue
			}
			flush()
			continue
		}
		cur.WriteByte(s[i])
	}
	flush()
	return out
}

func (o opts) String() string {
	parts := make([]string, len(o))
	for i, kv := range o {
		v := strings.ReplaceAll(kv.v, ",", ",,")
		if kv.bare {
			parts[i] = v
		} else {
			parts[i] = strings.ReplaceAll(kv.k, ",", ",,") + "=" + v
		}
	}
	return strings.Join(parts, ",")
}

func (o opts) first() string {
	if len(o) > 0 && o[0].bare {
		return o[0].v
	}
	return o.get("backend")
}

func (o opts) get(k string) string {
	for _, kv := range o {
		if kv.k == k {
			return kv.v
		}
	}
	return ""
}

func (o opts) has(k string) bool {
	for _, kv := range o {
		if kv.k == k {
			return true
		}
	}
	return false
}

func (o *opts) set(k, v string) {
	for i := range *o {
		if (*o)[i].k == k {
			(*o)[i].v = v
			return
		}
	}
	*o = append(*o, optKV{k: k, v: v})
}

func (o *opts) del(k string) {
	out := (*o)[:0]
	for _, kv := range *o {
		if kv.k != k {
			out = append(out, kv)
		}
	}
	*o = out
}

func (o *opts) keepOnly(keys ...string) {
	out := (*o)[:0]
	for _, kv := range *o {
		for _, k := range keys {
			if kv.k == k || kv.bare {
				out = append(out, kv)
				break
			}
		}
	}
	*o = out
}

// optEditor is the part of an option string RelaunchArgs edits, in either
// of -blockdev's two syntaxes.
type optEditor interface {
	get(k string) string
	set(k, v string)
	keepOnly(keys ...string)
	String() string
}

// parseBlockdev reads -blockdev's dotted-key syntax or its JSON form
// ({"driver":"file",...}, what libvirt passes).
func parseBlockdev(s string) optEditor {
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		m := jsonOpts{}
		if json.Unmarshal([]byte(s), &m) == nil {
			return m
		}
	}
	o := parseOpts(s)
	return &o
}

type jsonOpts map[string]any

func (m jsonOpts) get(k string) string {
	if v, ok := m[k].(string); ok {
		return v
	}
	return ""
}

func (m jsonOpts) set(k, v string) { m[k] = v }

func (m jsonOpts) keepOnly(keys ...string) {
	for k := range m {
		keep := false
		for _, want := range keys {
			keep = keep || k == want || strings.HasPrefix(want, k+".")
		}
		if !keep {
			delete(m, k)
		}
	}
}

func (m jsonOpts) String() string {
	b, _ := json.Marshal(map[string]any(m))
	return string(b)
}
