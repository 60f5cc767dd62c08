package policy

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/schedule"
)

// Replication keeps standby copies of VMs on a host of the DR site, from
// their backup points (the replications section; internal/replica):
//
//	replications:
//	  - name: web-dr
//	    repository: main           # whose points are replicated ("": the default)
//	    vms: [web-*, db-01]        # VM names (globs) of the repository's points
//	    connection: dr-kvm         # the DR host's QEMU, libvirt or vSphere connection:
//	                               #   the run goes to the worker of its host
//	    directory: /srv/dr         # standbys in DIR/VM (qcow2 overlay chains; not for vSphere)
//	    storage: {/var/lib/libvirt/images: /srv/dr-ssd}  # source datastore -> directory
//	                               #   (vSphere: -> DR datastore; the standby is VM-standby there)
//	    networks: {default: dr-net, br0: dr-br0}         # every source network, mapped
//	    keep: 3                    # restore points each standby keeps (default 3)
//	    rpo: 1h                    # coffer_replica_lag_seconds above it alerts
//	    schedule: "*/15 * * * *"   # runs on its own (or run-replication)
type Replication struct {
	Name       string   `yaml:"name"`
	Repository string   `yaml:"repository"`
	VMs        []string `yaml:"vms"`
	Connection string   `yaml:"connection"`
	Directory  string   `yaml:"directory"`
	// Storage maps a source datastore (a disk's directory or pool) to the
	// directory the standby of a VM on it is kept in; a VM on a datastore
	// the map does not name goes to Directory.
	Storage map[string]string `yaml:"storage"`
	// Networks maps every network a replicated VM is attached to, to the
	// DR site's: a network the map does not name fails the VM's run.
	Networks map[string]string `yaml:"networks"`
	Keep     int               `yaml:"keep"`
	RPO      Duration          `yaml:"rpo"`
	Schedule string            `yaml:"schedule"`
	Timezone string            `yaml:"timezone"`
}

// DefaultReplicaKeep is the restore points a standby keeps by default.
const DefaultReplicaKeep = 3

// MaxReplicaKeep bounds the chain of overlays a standby reads through.
const MaxReplicaKeep = 64

// DefaultReplicaRPO is the lag a replication without an rpo may reach
// before its standbys count as lagging (and CofferReplicaLagging fires).
const DefaultReplicaRPO = time.Hour

// RPOOrDefault is the replication's objective.
func (r Replication) RPOOrDefault() time.Duration {
	if r.RPO > 0 {
		return time.Duration(r.RPO)
	}
	return DefaultReplicaRPO
}

// KeepOrDefault is the restore points each standby keeps.
func (r Replication) KeepOrDefault() int {
	if r.Keep == 0 {
		return DefaultReplicaKeep
	}
	return r.Keep
}

// Matches reports whether a VM of that name is replicated.
func (r Replication) Matches(vm string) bool {
	return slices.ContainsFunc(r.VMs, func(g string) bool { ok, _ := path.Match(g, vm); return ok })
}

// StandbyDir is where the standby of a VM whose disks are on datastore
// is kept ("" when neither the storage map nor the directory places it).
func (r Replication) StandbyDir(vm, datastore string) string {
	base := r.Directory
	if d, ok := r.Storage[datastore]; ok {
		base = d
	}
	if base == "" {
		return ""
	}
	return filepath.Join(config.ExpandHome(base), vm)
}

// Replication returns the replication with that name.
func (c *Config) Replication(name string) (Replication, bool) {
	for _, r := range c.Replications {
		if r.Name == name {
			return r, true
		}
	}
	return Replication{}, false
}

// PutReplication adds r, or replaces the replication of the same name.
func (c *Config) PutReplication(r Replication) (*Config, error) {
	n := c.clone()
	n.Replications = put(n.Replications, r, func(y Replication) string { return y.Name })
	return n, n.Validate()
}

// DeleteReplication removes a replication (its standbys stay on their
// host, as they are).
func (c *Config) DeleteReplication(name string) (*Config, error) {
	if _, ok := c.Replication(name); !ok {
		return nil, fmt.Errorf("no replication named %q", name)
	}
	n := c.clone()
	n.Replications = slices.DeleteFunc(n.Replications, func(y Replication) bool { return y.Name == name })
	return n, n.Validate()
}

// Validate checks one replication against the connections it names.
func (r Replication) Validate(c *Config) error {
	var errs []error
	r.validate(c, func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) })
	return errors.Join(errs...)
}

func (r Replication) validate(c *Config, add func(string, ...any)) {
	where := "replication " + r.Name
	if len(r.VMs) == 0 {
		add("%s: vms is missing: name the VMs (or globs) whose backup points the standbys follow", where)
	}
	for _, g := range r.VMs {
		if _, err := path.Match(g, ""); err != nil {
			add("%s: vms: %q is not a glob: %v", where, g, err)
		}
	}
	cn, ok := c.Connection(r.Connection)
	switch {
	case !ok:
		add("%s: connection %q is not a connection of the configuration (the DR host's qemu, libvirt or vsphere connection)", where, r.Connection)
	case cn.Kind == "vsphere":
		r.validateVSphere(where, cn, add)
		return
	case cn.Kind != "qemu" && cn.Kind != "libvirt":
		add("%s: connection %s is of kind %s: standbys are kept on qemu, libvirt and vsphere hosts", where, cn.Name, cn.Kind)
	}
	r.validateDirs(where, add)
	r.validateCommon(where, add)
}

// validateVSphere checks a replication onto a vSphere DR site: its
// storage map names datastores, not directories (internal/replica/vsstandby).
func (r Replication) validateVSphere(where string, cn Connection, add func(string, ...any)) {
	var o struct {
		DataMoverVM string `yaml:"data-mover-vm"`
	}
	if cn.Options.Kind == 0 || cn.Options.Decode(&o) != nil || o.DataMoverVM == "" {
		add("%s: connection %s names no data-mover-vm: a vSphere standby's changed blocks are written through the data-mover VM the DR worker runs in", where, cn.Name)
	}
	if r.Directory != "" {
		add("%s: directory is for qemu and libvirt hosts: a vSphere standby is a VM on the datastore the storage map names", where)
	}
	if len(r.Storage) == 0 {
		add("%s: storage is missing: map each source datastore to the DR site's datastore", where)
	}
	for from, to := range r.Storage {
		if from == "" || to == "" {
			add("%s: storage: %q: %q maps an empty name", where, from, to)
		}
	}
	r.validateCommon(where, add)
}

func (r Replication) validateDirs(where string, add func(string, ...any)) {
	if r.Directory == "" && len(r.Storage) == 0 {
		add("%s: directory is missing: where the standbys are kept on the DR host", where)
	}
	dirs := []string{r.Directory}
	for _, d := range r.Storage {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if d != "" && !filepath.IsAbs(config.ExpandHome(d)) {
			add("%s: %q is not an absolute path: the worker of the DR host resolves it whatever its working directory", where, d)
		}
	}
}

func (r Replication) validateCommon(where string, add func(string, ...any)) {
	for from, to := range r.Networks {
		if from == "" || to == "" {
			add("%s: networks: %q: %q maps an empty name", where, from, to)
		}
	}
	if r.Keep < 0 || r.Keep > MaxReplicaKeep {
		add("%s: keep must be from 1 to %d restore points (default %d)", where, MaxReplicaKeep, DefaultReplicaKeep)
	}
	if r.RPO > 0 && time.Duration(r.RPO) < time.Minute {
		add("%s: rpo %s is less than a minute: write how far the standby may lag behind, like 1h", where, r.RPO)
	}
	if r.Schedule != "" {
		if _, err := schedule.Parse(r.Schedule, r.Timezone); err != nil {
			add("%s: schedule %q: %v (want 5 cron fields like \"*/15 * * * *\", or @hourly, @every 30m)", where, r.Schedule, err)
		}
	}
}
