package policy

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// StorageSnapshots is the storage-snapshots section: the providers of
// storage-level snapshots that `group: datastore` reads VMs from, each
// naming the connections and the datastore directories it covers.
//
//	storage-snapshots:
//	  - name: xfs-a
//	    kind: reflink              # reflink, btrfs or exec
//	    connections: [lab]
//	    datastores: [/srv/vms]     # this directory and every one below it
//	    timeout: 2m                # one provider step (default 2m)
//	    min-free: 5%               # or 20GiB; 0 turns the check off (default 5%)
//	  - name: sub
//	    kind: btrfs
//	    connections: [lab]
//	    datastores: [/srv/btrfs/vms]
//	    ship-to: /mnt/dr-btrfs/lab # kind btrfs or reflink: where `storage-snapshots ship` sends them
//	  - name: array
//	    kind: exec
//	    connections: [lab]
//	    datastores: [/mnt/lun7]
//	    command: [/usr/local/bin/snap-lun7, --pool, gold]
//	    changes: true              # the command answers "changed" too
//	  - name: vmfs-array
//	    kind: exec
//	    connections: [vcenter]
//	    datastores: ["[vmfs-gold-01]"] # vSphere datastores, by name in brackets
//	    command: [/usr/local/bin/snap-vmfs]
//
// A QEMU datastore is the directory of a disk file (see the qemu
// connector); a provider covers it when it is one of its datastores or
// below one. A vSphere datastore lives on an array or filer, not on a
// directory of this host: an exec provider names it as vSphere writes a
// datastore path, "[name]", and covers exactly that datastore. The
// provider kinds are described in internal/storagesnap.
type StorageSnapshots []StorageProvider

// StorageProvider is one entry of the storage-snapshots section.
type StorageProvider struct {
	Name        string   `yaml:"name"`
	Kind        string   `yaml:"kind"`
	Connections []string `yaml:"connections"`
	Datastores  []string `yaml:"datastores"`
	// Timeout bounds each step (create, present, delete); the VMs of a
	// batch are held still while create runs, so it is also the longest
	// pause a provider can cause. 0: 2 minutes.
	Timeout Duration `yaml:"timeout"`
	// Command is the exec kind's program and its first arguments; the
	// action (create, present, list, delete) is appended.
	Command []string `yaml:"command"`
	// Changes says the exec kind's command also answers the optional
	// "changed" action: the ranges of a disk file that differ between two
	// of its snapshots. Without it the change sets after lost dirty
	// bitmaps come from FIEMAP on the presented files, which works only
	// where they are presented on a filesystem with extent maps.
	Changes bool `yaml:"changes"`
	// MinFree is the free space a reflink or btrfs datastore must keep
	// for a snapshot to be taken ("5%", "20GiB"; "0" turns the check
	// off). Empty is DefaultMinFree.
	MinFree MinFree `yaml:"min-free"`
	// ShipTo is a directory on a second filesystem of the provider's kind
	// (the DR site's btrfs, or reflink filesystem, mounted here) that
	// `coffer storage-snapshots ship` sends the kept snapshots of this
	// btrfs or reflink provider's datastores to, each incrementally
	// against the one shipped before it.
	ShipTo string `yaml:"ship-to"`
}

// DefaultMinFree is the free space a datastore must have for coffer to
// snapshot it. While a snapshot is held, every block production
// overwrites takes new space, so a datastore close to full would fill up
// under the backup and fail the production VMs' writes, not coffer's.
const DefaultMinFree = "5%"

// MinFree is a share of a filesystem ("5%") or a number of bytes
// ("20GiB"), as written in the configuration.
type MinFree string

// Bytes is the free space required of a filesystem of size total bytes.
func (m MinFree) Bytes(total uint64) (uint64, error) {
	s := strings.TrimSpace(string(m))
	if s == "" {
		s = DefaultMinFree
	}
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || !(f >= 0 && f <= 100) {
			return 0, fmt.Errorf("min-free %q: want a share of the filesystem from 0%% to 100%% (like 5%%) or bytes (like 20GiB)", string(m))
		}
		return uint64(f / 100 * float64(total)), nil
	}
	b, err := ParseByteRate(s)
	if err != nil || strings.HasSuffix(strings.ToLower(s), "/s") {
		return 0, fmt.Errorf("min-free %q: want a share of the filesystem (like 5%%) or bytes (like 20GiB)", string(m))
	}
	return uint64(b), nil
}

// MaxKeptStorageSnapshots bounds keep-storage-snapshots: every kept
// snapshot pins the blocks production has overwritten since it was taken,
// and arrays limit snapshots per volume (often to 16 or 32 in all).
const MaxKeptStorageSnapshots = 16

// StorageKinds are the provider kinds this version has.
var StorageKinds = []string{"reflink", "btrfs", "exec"}

// HasProvider reports whether a provider of this section covers the
// connection (at least some of its datastores).
func (s StorageSnapshots) HasProvider(connection string) bool {
	for _, p := range s {
		for _, c := range p.Connections {
			if c == connection {
				return true
			}
		}
	}
	return false
}

// Provider returns the provider covering a datastore of a connection and
// the datastore root it covers it through (the longest one).
func (s StorageSnapshots) Provider(connection, datastore string) (StorageProvider, string, bool) {
	var best StorageProvider
	root := ""
	for _, p := range s {
		for _, c := range p.Connections {
			if c != connection {
				continue
			}
			for _, d := range p.Datastores {
				if Covers(d, datastore) && len(d) > len(root) {
					best, root = p, filepath.Clean(d)
				}
			}
		}
	}
	return best, root, root != ""
}

// ProviderOf is Provider for a datastore that may not be named by its
// directory: a libvirt pool's name ("images") or libvirt's "dir:/path"
// for disks outside every pool. Providers cover directories, so the
// datastore is looked up by DatastoreDir.
func (s StorageSnapshots) ProviderOf(connection, datastore string, diskPaths []string) (StorageProvider, string, bool) {
	return s.Provider(connection, DatastoreDir(datastore, diskPaths))
}

// DatastoreDir is the directory a datastore stands for: the datastore
// itself when it is a path (QEMU's), "[name]" for a vSphere datastore
// (whose disks' paths are "[name] ..."), the path of libvirt's "dir:PATH",
// and otherwise (a pool's name) the deepest directory that holds every
// one of its disks' files; the name unchanged when there is none.
func DatastoreDir(datastore string, diskPaths []string) string {
	switch {
	case filepath.IsAbs(datastore):
		return datastore
	case onVSphereDatastore(datastore, diskPaths):
		return VSphereDatastore(datastore)
	case IsVSphereDatastore(datastore):
		return datastore
	case strings.HasPrefix(datastore, "dir:") && filepath.IsAbs(datastore[len("dir:"):]):
		return datastore[len("dir:"):]
	}
	common := ""
	for i, p := range diskPaths {
		if !filepath.IsAbs(p) {
			return datastore
		}
		dir := filepath.Dir(filepath.Clean(p))
		if i == 0 {
			common = dir
			continue
		}
		for !Covers(common, dir) {
			common = filepath.Dir(common)
		}
	}
	if common == "" || common == "/" {
		return datastore
	}
	return common
}

// VSphereDatastore is how a storage provider names the vSphere datastore
// called name: as vSphere starts a datastore path, "[name]".
func VSphereDatastore(name string) string { return "[" + name + "]" }

// IsVSphereDatastore reports whether a provider's datastore entry names a
// vSphere datastore ("[name]") rather than a directory.
func IsVSphereDatastore(entry string) bool {
	return len(entry) > 2 && entry[0] == '[' && strings.IndexByte(entry, ']') == len(entry)-1
}

// VSpherePath splits a vSphere datastore path ("[ds] vm/vm.vmdk") into
// the datastore's entry ("[ds]") and the file's path on it.
func VSpherePath(p string) (entry, rel string, ok bool) {
	i := strings.Index(p, "] ")
	if !strings.HasPrefix(p, "[") || i < 2 {
		return "", "", false
	}
	return p[:i+1], strings.TrimSpace(p[i+2:]), true
}

// onVSphereDatastore: every disk path is a vSphere datastore path on the
// datastore called name (the vSphere connector's datastores are names).
func onVSphereDatastore(name string, diskPaths []string) bool {
	for _, p := range diskPaths {
		if e, _, ok := VSpherePath(p); !ok || e != VSphereDatastore(name) {
			return false
		}
	}
	return len(diskPaths) > 0
}

// Covers reports whether a datastore directory is root or below it; a
// vSphere datastore entry ("[name]") covers only itself.
func Covers(root, datastore string) bool {
	r, d := filepath.Clean(root), filepath.Clean(datastore)
	return d == r || strings.HasPrefix(d, strings.TrimSuffix(r, "/")+"/")
}

func (s StorageSnapshots) validate(conns map[string]bool, add func(string, ...any)) {
	seen := map[string]bool{}
	for i, p := range s {
		where := "storage-snapshots " + p.Name
		switch {
		case p.Name == "":
			add("storage-snapshots entry %d: name is missing", i+1)
		case seen[p.Name]:
			add("storage-snapshots: %s is defined twice", p.Name)
		}
		seen[p.Name] = true
		if p.Kind == "" {
			add("%s: kind is missing (reflink, btrfs or exec)", where)
		} else {
			oneOf(where+": kind", p.Kind, add, append([]string{""}, StorageKinds...)...)
		}
		if len(p.Connections) == 0 {
			add("%s: connections is missing: name the connections whose VMs it snapshots", where)
		}
		for _, c := range p.Connections {
			if !conns[c] {
				add("%s: unknown connection %q%s", where, c, known(conns))
			}
		}
		if len(p.Datastores) == 0 {
			add("%s: datastores is missing: name the directories it snapshots (a VM's datastore is the directory of its disk files)", where)
		}
		for _, d := range p.Datastores {
			switch {
			case IsVSphereDatastore(d) && p.Kind != "exec":
				add("%s: datastores: %s is a vSphere datastore, which only kind: exec can snapshot (through the array or filer behind it)", where, d)
			case !filepath.IsAbs(d) && !IsVSphereDatastore(d):
				add("%s: datastores: %q is not an absolute directory (nor a vSphere datastore in brackets, like \"[datastore1]\")", where, d)
			}
		}
		switch {
		case p.Kind == "exec" && len(p.Command) == 0:
			add("%s: command is missing: the program that creates, presents, lists and deletes snapshots (see docs/07-storage-integration.md)", where)
		case p.Kind != "exec" && len(p.Command) > 0:
			add("%s: command only applies to kind: exec", where)
		}
		if p.Changes && p.Kind != "exec" {
			add("%s: changes only applies to kind: exec (reflink and btrfs snapshots are compared by their extent maps)", where)
		}
		if _, err := p.MinFree.Bytes(1 << 40); err != nil {
			add("%s: %v", where, err)
		} else if p.Kind == "exec" && p.MinFree != "" {
			add("%s: min-free only applies to kinds reflink and btrfs (an array keeps its own snapshot reserve)", where)
		}
		switch {
		case p.ShipTo != "" && p.Kind != "btrfs" && p.Kind != "reflink":
			add("%s: ship-to only applies to kind: btrfs (btrfs send and receive ship its snapshots) and kind: reflink (their changed extents)", where)
		case p.ShipTo != "" && !filepath.IsAbs(p.ShipTo):
			add("%s: ship-to must be an absolute directory, not %q", where, p.ShipTo)
		}
	}
}
