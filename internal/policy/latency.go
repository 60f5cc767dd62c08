package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/iolatency"
)

// LatencyControls is the latency-control section: production protection
// in the manner of vSphere's Storage I/O Control. While a backup reads
// from a datastore it names, the engine watches that datastore's latency
// (its block device's /proc/diskstats, and the disks of the VMs being
// backed up as their hypervisor times them) and slows the backup's reads
// when it passes the threshold (internal/iolatency, internal/engine/latency).
//
//	latency-control:
//	  - name: vms                  # optional in the file; objects of the API need one
//	    datastores: [/srv/vms, /srv/ssd-*]   # globs, like resource-groups
//	    threshold: 30ms            # congestion threshold (default 30ms)
//	    min-rate: 4MiB/s           # a task is never slowed below this (default 4MiB/s)
//	    interval: 1s               # how often latency is sampled (default 1s)
//	    cpu-nice: 10               # the backup's CPU work runs at this niceness (default 10; 0: off)
//
// A datastore that no entry names is not watched. The first entry naming
// it applies.
type LatencyControls []LatencyControl

// LatencyControl is one entry of the latency-control section.
type LatencyControl struct {
	// Name is optional in the file; an entry created through the API
	// (internal/configobj) has one, by which it is changed.
	Name       string   `yaml:"name"`
	Datastores []string `yaml:"datastores"`
	Threshold  Duration `yaml:"threshold"`
	MinRate    ByteRate `yaml:"min-rate"`
	Interval   Duration `yaml:"interval"`
	// CPUNice is the niceness at which backups reading from the
	// datastores run their pipeline (backup.Options.Nice): where coffer
	// runs on the hypervisor host, the VMs' CPU work comes first. nil is
	// DefaultCPUNice, 0 leaves the pipeline at the process's priority.
	CPUNice *int `yaml:"cpu-nice"`
}

// Nice is the entry's CPU niceness for backups, its default filled.
func (c LatencyControl) Nice() int {
	if c.CPUNice == nil {
		return DefaultCPUNice
	}
	return *c.CPUNice
}

// Latency control defaults: SIOC's congestion threshold; a floor at which
// a 1 TiB disk still reads in under three days; SIOC samples every 4 s,
// coffer every second because a backup's burst can build a queue faster
// than a VM's I/O does.
const (
	DefaultLatencyThreshold = 30 * time.Millisecond
	DefaultLatencyMinRate   = 4 << 20
	DefaultLatencyInterval  = time.Second
	minLatencyInterval      = 10 * time.Millisecond
	// DefaultCPUNice is the niceness of a watched backup's pipeline: the
	// usual one for background work, which gets about a tenth of a core
	// a VM competes for and all of an idle one.
	DefaultCPUNice = 10
)

// For returns the entry that applies to a datastore, with defaults filled.
func (l LatencyControls) For(datastore string) (LatencyControl, bool) {
	for _, c := range l {
		if anyMatch(c.Datastores, datastore) {
			if c.Threshold == 0 {
				c.Threshold = Duration(DefaultLatencyThreshold)
			}
			if c.MinRate == 0 {
				c.MinRate = DefaultLatencyMinRate
			}
			if c.Interval == 0 {
				c.Interval = Duration(DefaultLatencyInterval)
			}
			return c, true
		}
	}
	return LatencyControl{}, false
}

func (l LatencyControls) validate(add func(string, ...any)) {
	seen := map[string]bool{}
	for i, c := range l {
		where := fmt.Sprintf("latency-control entry %d", i+1)
		if c.Name != "" {
			where = "latency-control " + c.Name
			if seen[c.Name] {
				add("latency-control: %s is defined twice", c.Name)
			}
			seen[c.Name] = true
		}
		if len(c.Datastores) == 0 {
			add("%s: datastores is missing: name the datastores (globs, like /srv/vms or /srv/*) whose latency it watches", where)
		}
		checkGlobs(where+": datastores", c.Datastores, add)
		if c.CPUNice != nil && (*c.CPUNice < 0 || *c.CPUNice > 19) {
			add("%s: cpu-nice %d is out of range: write a niceness from 1 (slightly behind the VMs) to 19 (only idle CPU), or 0 to leave backups at coffer's own priority", where, *c.CPUNice)
		}
		if c.Interval > 0 && time.Duration(c.Interval) < minLatencyInterval {
			add("%s: interval %s is too short: sample at most every %s (the default is %s)", where, c.Interval, Duration(minLatencyInterval), Duration(DefaultLatencyInterval))
		}
	}
}

// Unmeasurable refuses the entries that can measure nothing: latency is
// measured on a datastore's block device, which only a datastore that is
// a directory of the host (an absolute path) has, or on the disks of the
// VMs being read, as their hypervisor times them, which only connections
// whose kind reports it (diskLatency) give. An entry naming no directory,
// in a configuration without such a connection, would watch nothing and
// never slow a backup: an error, not a silent no-op.
func (l LatencyControls) Unmeasurable(conns []Connection, diskLatency func(kind string) bool) []error {
	var timed, untimed []string
	for _, c := range conns {
		if diskLatency(c.Kind) {
			timed = append(timed, c.Name)
		} else {
			untimed = append(untimed, c.Name+" ("+c.Kind+")")
		}
	}
	if len(timed) > 0 {
		return nil
	}
	var errs []error
	for i, c := range l {
		if len(c.Datastores) == 0 || slices.ContainsFunc(c.Datastores, filepath.IsAbs) {
			continue // a missing list is validate's; a directory has a device
		}
		where := fmt.Sprintf("latency-control entry %d", i+1)
		if c.Name != "" {
			where = "latency-control " + c.Name
		}
		have := "the configuration has no connection"
		if len(untimed) > 0 {
			have = "the configuration's connections do not: " + strings.Join(untimed, ", ")
		}
		errs = append(errs, fmt.Errorf("%s: it can measure nothing: its datastores %v are not directories of a host (absolute paths), "+
			"so no block device is watched, and no connection reports its VMs' disk latency (qemu and libvirt connections do; %s): "+
			"name the datastores' directories, or remove the entry", where, c.Datastores, have))
	}
	return errs
}

// Shares weigh a policy's backups against others reading the same
// congested datastore: the fewest shares slow down first and recover
// slowest. Written low, normal or high (SIOC's 500, 1000, 2000) or a
// number; 0 is normal.
type Shares int

var shareNames = map[string]Shares{"low": iolatency.SharesLow, "normal": iolatency.SharesNormal, "high": iolatency.SharesHigh}

// maxShares bounds a numeric value (SIOC's own bound is 10000 per disk).
const maxShares = 100000

// ParseShares parses low, normal, high or a number from 1 to 100000.
func ParseShares(s string) (Shares, error) {
	if v, ok := shareNames[strings.ToLower(strings.TrimSpace(s))]; ok {
		return v, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > maxShares {
		return 0, fmt.Errorf("shares %q: write low, normal, high or a number from 1 to %d", s, maxShares)
	}
	return Shares(n), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *Shares) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseShares(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = v
	return nil
}

// MarshalYAML writes the levels by name.
func (s Shares) MarshalYAML() (any, error) {
	for name, v := range shareNames {
		if v == s {
			return name, nil
		}
	}
	return int(s), nil
}

// Value is the number of shares, normal when unset.
func (s Shares) Value() int {
	if s <= 0 {
		return iolatency.SharesNormal
	}
	return int(s)
}
