// Package policy is the declarative side of the job engine: hypervisor
// connections, repositories, concurrency limits, resource groups, backup
// policies, storage snapshot providers and media libraries, read from the configuration
// file's sections of the same names, validated with errors that name the
// policy, the key and the line.
//
//	connections:
//	  - name: lab
//	    kind: qemu                 # qemu, vsphere, fake, ...
//	    options: {...}             # decoded by the connector itself
//	repositories:
//	  - name: main
//	    location: /srv/coffer      # or s3://bucket/prefix
//	    password-file: /etc/coffer/main.pw
//	    streams: 8                 # concurrent write streams
//	limits:
//	  tasks: 64                    # concurrent VM tasks in total
//	  per-host: 8
//	  per-datastore: 8             # the default
//	  rate: 400MiB/s               # I/O in total
//	  task-rate: 100MiB/s          # I/O per VM task
//	resource-groups:
//	  - name: controller-a         # datastores behind one storage controller
//	    datastores: [ssd-*]
//	    limit: 4
//	policies:
//	  - name: nightly
//	    connection: lab
//	    repository: main
//	    select: {names: [web-*, db-01], tags: {env: prod}}
//	    exclude: {names: [web-test-*]}
//	    mode: incremental
//	    full-every: 7              # one run in seven is full
//	    full-on: [sunday]
//	    snapshot: quiesced
//	    quiesce: fallback
//	    schedule: "0 22 * * *"
//	    timezone: Europe/Berlin    # the schedule's zone (default: the server's)
//	    retention: {keep-daily: 14, keep-weekly: 8}
//	    timeouts: {vm: 4h, snapshot-create: 10m}
//	    retries: {attempts: 3, backoff: 30s}
//	    immutable-for: 30d         # points undeletable for 30 days (Object Lock)
//	    rpo: 26h                   # a VM without a good point that recent is unprotected
//	    group: datastore           # one storage snapshot per datastore (below)
//	    storage-fallback: vm       # datastore without a usable provider: VM by VM (default: fail)
//	    shares: high               # slowed last on a congested datastore (low, normal, high, or a number)
//	storage-snapshots:             # see StorageSnapshots
//	  - {name: xfs-a, kind: reflink, connections: [lab], datastores: [/srv/vms]}
//	latency-control:               # see LatencyControls
//	  - {datastores: [/srv/vms], threshold: 30ms}
//	media-libraries:               # see MediaLibrary
//	  - {name: vtl1, kind: vtl, directory: /srv/vtl}
//	replications:                  # see Replication
//	  - {name: web-dr, vms: [web-*], connection: dr-kvm, directory: /srv/dr, networks: {default: dr-net}}
//	failover-plans:                # see FailoverPlan
//	  - {name: shop, replication: web-dr, groups: [{vms: [{name: db-01}], probes: [tcp:5432]}, {vms: [{name: web-01}]}]}
package policy

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/retention"
)

// Config is everything the engine reads from the configuration file.
type Config struct {
	Connections    []Connection
	Repositories   []Repository
	Limits         Limits
	ResourceGroups []ResourceGroup
	Policies       []Policy
	// StorageSnapshots are the providers group: datastore reads from.
	StorageSnapshots StorageSnapshots
	// LatencyControl watches datastores' latency and slows backup reads
	// while it is too high (latency.go).
	LatencyControl LatencyControls
	// MediaLibraries are the tape libraries copies to media write to
	// (media.go).
	MediaLibraries []MediaLibrary
	// Replications keep standby copies of VMs on DR hosts
	// (replication.go).
	Replications []Replication
	// FailoverPlans start replications' standbys in ordered groups
	// (failoverplan.go).
	FailoverPlans []FailoverPlan
}

// Connection is one hypervisor connection.
type Connection struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"`
	// Options are the connector's own settings (QMP socket globs, a
	// vCenter URL, the fake fleet's shape), decoded by the connector with
	// DecodeOptions.
	Options yaml.Node `yaml:"options"`
}

// HostOption is the connection's host option (libvirt's, QEMU's): the
// host its VMs are on, "" when it names none.
func (c Connection) HostOption() string {
	var o struct {
		Host string `yaml:"host"`
	}
	if c.Options.Kind == 0 || c.Options.Decode(&o) != nil {
		return ""
	}
	return o.Host
}

// DecodeOptions decodes the connector-specific options into v, refusing
// keys v has no field for.
func (c Connection) DecodeOptions(v any) error {
	if c.Options.Kind == 0 {
		return nil
	}
	if err := config.DecodeNode(&c.Options, v, "connections."+c.Name+".options"); err != nil {
		return fmt.Errorf("connection %s: %w", c.Name, err)
	}
	return nil
}

// Repository is a named backup repository.
type Repository struct {
	Name         string `yaml:"name"`
	Location     string `yaml:"location"`
	PasswordFile string `yaml:"password-file"`
	// Streams bounds concurrent VM tasks writing to it (0: limits'
	// per-repository).
	Streams int `yaml:"streams"`
}

// Limits bound concurrency and I/O engine-wide.
type Limits struct {
	Tasks         int      `yaml:"tasks"`          // VM tasks in flight in total
	PerHost       int      `yaml:"per-host"`       // per hypervisor host (0: no limit)
	PerDatastore  int      `yaml:"per-datastore"`  // per datastore (default 8)
	PerRepository int      `yaml:"per-repository"` // write streams per repository (0: no limit)
	Rate          ByteRate `yaml:"rate"`           // bytes/s read in total (0: unlimited)
	TaskRate      ByteRate `yaml:"task-rate"`      // bytes/s read per task (0: unlimited)
	// BootVerifications bounds the points booted at once by `coffer
	// verify boot` and the policies' verify-boot schedules (default 1):
	// each is a whole VM under TCG or KVM, and verification must never
	// crowd out backups.
	BootVerifications int `yaml:"boot-verifications"`
}

// Defaults for unset limits.
const (
	DefaultTasks        = 16
	DefaultPerDatastore = 8
)

// WithDefaults fills unset limits.
func (l Limits) WithDefaults() Limits {
	if l.Tasks == 0 {
		l.Tasks = DefaultTasks
	}
	if l.PerDatastore == 0 {
		l.PerDatastore = DefaultPerDatastore
	}
	if l.BootVerifications == 0 {
		l.BootVerifications = 1
	}
	return l
}

// ResourceGroup is a named set of datastores and hosts sharing a limit,
// e.g. the datastores behind one storage controller or fabric path. A VM
// belongs to it when its host or any of its datastores matches.
type ResourceGroup struct {
	Name       string   `yaml:"name"`
	Datastores []string `yaml:"datastores"` // globs
	Hosts      []string `yaml:"hosts"`      // globs
	Limit      int      `yaml:"limit"`
}

// Policy says what to back up, how, where, when and for how long.
type Policy struct {
	Name        string   `yaml:"name"`
	Connection  string   `yaml:"connection"`  // one connection, or
	Connections []string `yaml:"connections"` // several
	// Repository names a repositories entry; "" is the default repository
	// (the `repository` key / --repo).
	Repository string   `yaml:"repository"`
	Select     Selector `yaml:"select"`
	Exclude    Selector `yaml:"exclude"`
	Mode       string   `yaml:"mode"`       // incremental (default), differential, full
	FullEvery  int      `yaml:"full-every"` // one run in N is full
	FullOn     []string `yaml:"full-on"`    // weekdays whose runs are full
	Snapshot   string   `yaml:"snapshot"`   // crash-consistent (default), quiesced, with-memory, suspend, as-is
	Quiesce    string   `yaml:"quiesce"`    // fallback (default), required
	// Group "datastore" protects each datastore as a group through a
	// storage snapshot (see engine); "" or "vm" backs up VM by VM.
	Group string `yaml:"group"`
	// StorageFallback decides what a group: datastore batch does when its
	// datastore cannot be snapshotted (no provider covers it, or it is not
	// on a reflink filesystem): "fail" (default) fails its VMs with the
	// reason, "vm" backs them up VM by VM with a warning.
	StorageFallback string `yaml:"storage-fallback"`
	// KeepStorageSnapshots keeps the newest N storage snapshots of each
	// datastore a group: datastore run took, as fast restore points beside
	// the repository's (Zero Downtime Backup): a restore from one clones
	// the disk files in seconds without reading the repository. 0 (the
	// default) deletes each storage snapshot once its VMs are read. Each
	// run applies N as it is then to the snapshots the policy kept
	// before: lowered to 0, the next run deletes them all.
	KeepStorageSnapshots int    `yaml:"keep-storage-snapshots"`
	Schedule             string `yaml:"schedule"` // cron: "0 22 * * *", "@daily"
	// Timezone is the zone of Schedule's times (an IANA name like
	// Europe/Berlin; "": the server's). Across daylight saving changes a
	// run in a skipped hour runs once at the jump, and a repeated hour
	// runs once (internal/schedule).
	Timezone  string            `yaml:"timezone"`
	Retention retention.Policy  `yaml:"retention"`
	Timeouts  Timeouts          `yaml:"timeouts"`
	Retries   Retries           `yaml:"retries"`
	Tasks     int               `yaml:"tasks"` // this policy's own cap on VM tasks (0: none)
	Tags      map[string]string `yaml:"tags"`  // added to every backup point
	// ImmutableFor locks every point the policy makes for this long after
	// its backup (S3 Object Lock); the repository must have retention.
	ImmutableFor Duration `yaml:"immutable-for"`
	// ChangeCheck is how many spans of each disk an incremental reads to
	// check change tracking (internal/backup/changecheck.go); 0 is the
	// default (6), -1 turns the check off.
	ChangeCheck int `yaml:"change-check"`
	// RPO is the recovery point objective: the oldest a VM's newest good
	// point may be before the VM counts as unprotected (metrics, the
	// rpo-missed notification). 0: none.
	RPO Duration `yaml:"rpo"`
	// VerifyBoot proves on a schedule that the policy's points boot
	// (internal/bootverify); the server's maintenance scheduler runs it.
	VerifyBoot *VerifyBoot `yaml:"verify-boot"`
	// Hooks run commands around each VM's snapshot, in the guest or on the
	// backup host, for application-consistent points (hooks.go).
	Hooks []Hook `yaml:"hooks"`
	// Shares decide whose backups slow down first when a datastore of
	// the latency-control section is congested (latency.go).
	Shares Shares `yaml:"shares"`
	// Workers, when set, are the only workers (by name) that may run the
	// policy's VM units: its affinity, as Veeam restricts a job to chosen
	// proxies, of a site or beside a repository. Among them each unit
	// still needs a worker whose reach covers it (engine/route). It has
	// no effect on a server without workers.
	Workers []string `yaml:"workers"`
}

// VerifyBoot is when and how a policy's points are proven to boot.
type VerifyBoot struct {
	Schedule string `yaml:"schedule"` // cron, like the policy's
	// Timezone is the zone of Schedule's times ("": the server's).
	Timezone string `yaml:"timezone"`
	// Points is which points each run boots: latest (each VM's newest,
	// the default) or first-of-day (each VM's first point of the day the
	// run falls on, in the schedule's time zone).
	Points  string   `yaml:"points"`
	Timeout Duration `yaml:"timeout"` // the whole ladder, per VM (default 5m)
	Marker  string   `yaml:"marker"`  // console regex (default "login:")
	Probes  []string `yaml:"probes"`  // tcp:PORT, http:PORT/PATH=STATUS, exec:COMMAND
}

// Boot verification point choices.
const (
	BootLatest     = "latest"
	BootFirstOfDay = "first-of-day"
)

// Timeouts bound each VM and each hypervisor operation; zero means the
// default below (or, for operations, the connector's default).
type Timeouts struct {
	VM             time.Duration `yaml:"vm"`
	Inventory      time.Duration `yaml:"inventory"`
	SnapshotCreate time.Duration `yaml:"snapshot-create"`
	SnapshotRemove time.Duration `yaml:"snapshot-remove"`
	Quiesce        time.Duration `yaml:"quiesce"`
	Setup          time.Duration `yaml:"setup"`
}

// Default timeouts.
const (
	DefaultVMTimeout        = 24 * time.Hour
	DefaultInventoryTimeout = 5 * time.Minute
)

// Retries control re-running a VM after a transient hypervisor error.
type Retries struct {
	Attempts   int           `yaml:"attempts"`    // total attempts (default 3)
	Backoff    time.Duration `yaml:"backoff"`     // first wait (default 30s), doubled each time
	MaxBackoff time.Duration `yaml:"max-backoff"` // cap (default 10m)
}

// WithDefaults fills unset retry settings.
func (r Retries) WithDefaults() Retries {
	if r.Attempts == 0 {
		r.Attempts = 3
	}
	if r.Backoff == 0 {
		r.Backoff = 30 * time.Second
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = 10 * time.Minute
	}
	return r
}

// RetainUntil is when a point of this policy backed up at t may be deleted
// again: zero when the policy does not ask for immutability.
func (p Policy) RetainUntil(t time.Time) time.Time {
	if p.ImmutableFor <= 0 {
		return time.Time{}
	}
	return LockEnd(t, time.Duration(p.ImmutableFor))
}

// LockEnd is t+d rounded up to the second: S3 keeps retention dates in
// whole seconds, and a lock must not end before the time asked for.
func LockEnd(t time.Time, d time.Duration) time.Time {
	end := t.Add(d)
	if r := end.Truncate(time.Second); !r.Equal(end) {
		end = r.Add(time.Second)
	}
	return end.UTC()
}

// ConnectionNames lists the policy's connections.
func (p Policy) ConnectionNames() []string {
	if p.Connection != "" {
		return append([]string{p.Connection}, p.Connections...)
	}
	return p.Connections
}

// Load reads and validates the engine's sections of a configuration file.
func Load(f *config.File) (*Config, error) {
	c, err := Decode(f)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Decode reads the engine's sections strictly (an unknown key anywhere is
// an error) without validating what they say; every command does this when
// it loads the file, so no section is ever accepted and ignored.
func Decode(f *config.File) (*Config, error) {
	c := &Config{}
	for _, s := range []struct {
		name string
		v    any
	}{
		{"connections", &c.Connections}, {"repositories", &c.Repositories}, {"limits", &c.Limits},
		{"resource-groups", &c.ResourceGroups}, {"policies", &c.Policies}, {"storage-snapshots", &c.StorageSnapshots},
		{"latency-control", &c.LatencyControl},
		{"media-libraries", &c.MediaLibraries},
		{"replications", &c.Replications},
		{"failover-plans", &c.FailoverPlans},
	} {
		if err := f.Decode(s.name, s.v); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Connection is the connection named name.
func (c *Config) Connection(name string) (Connection, bool) {
	for _, x := range c.Connections {
		if x.Name == name {
			return x, true
		}
	}
	return Connection{}, false
}

// Policy returns the policy with that name.
func (c *Config) Policy(name string) (Policy, bool) {
	for _, p := range c.Policies {
		if p.Name == name {
			return p, true
		}
	}
	return Policy{}, false
}

// Repository returns the repository with that name.
func (c *Config) Repository(name string) (Repository, bool) {
	for _, r := range c.Repositories {
		if r.Name == name {
			return r, true
		}
	}
	return Repository{}, false
}
