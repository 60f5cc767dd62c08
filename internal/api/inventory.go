package api

import "time"

// VM is one VM of a hypervisor connection's inventory, with what protects
// it: the policies that select it and its last backup point.
type VM struct {
	Connection string            `json:"connection"`
	VM         string            `json:"vm"`
	VMID       string            `json:"vm_id"`
	Host       string            `json:"host,omitempty"`
	Datastores []string          `json:"datastores"`
	Tags       map[string]string `json:"tags"`
	PowerState string            `json:"power_state,omitempty"`
	// GuestAgent: qemu-guest-agent or VMware Tools runs, so quiesced VM
	// snapshots are possible.
	GuestAgent       bool     `json:"guest_agent"`
	ProvisionedBytes int64    `json:"provisioned_bytes"`
	Policies         []string `json:"policies"`
	// LastPoint is the newest backup point the catalog knows (absent when
	// there is none, or the catalog is unavailable).
	LastPointID string    `json:"last_point_id,omitempty"`
	LastBackup  time.Time `json:"last_backup,omitzero"`
	LastMode    string    `json:"last_mode,omitempty"`
	AgeSeconds  float64   `json:"age_seconds,omitempty"`
	// Covered: a policy selects the VM and it has a backup point.
	Covered bool `json:"covered"`
	// Protection is how the VM stands against its RPO (Protection*
	// constants), RPOSeconds that RPO: the strictest of its policies', or
	// the default when none sets one.
	Protection string  `json:"protection"`
	RPOSeconds float64 `json:"rpo_seconds"`
	// ChangeTracking: changed block tracking is on for every disk.
	ChangeTracking bool   `json:"change_tracking"`
	Disks          []Disk `json:"disks"`
	// Busy: the connection could not describe the VM at its last refresh
	// (a backup held its QEMU monitor); what is shown is its last known
	// state, from an earlier refresh.
	Busy bool `json:"busy"`
}

// Disk is one virtual disk of a VM in the inventory.
type Disk struct {
	Key       string `json:"key"`
	Name      string `json:"name,omitempty"`
	SizeBytes int64  `json:"size_bytes"`
	Datastore string `json:"datastore,omitempty"`
	Path      string `json:"path,omitempty"`
	Format    string `json:"format,omitempty"`
}

// Inventory is a page of the VMs of the connections asked for, as the
// server's last refresh of each listed them; Connections says when that
// was, and Errors names the connections whose inventory is missing or
// whose last refresh failed (their VMs are those of the last success).
type Inventory struct {
	VMs         []VM              `json:"vms"`
	Connections []InventoryState  `json:"connections"`
	Errors      []ConnectionError `json:"errors"`
	// Counts is given when the listing judged every VM (order=attention
	// or attention=true): how many VMs there are, and match.
	Counts *InventoryCounts `json:"counts,omitempty"`
	// Next is the cursor of the next page when more VMs may follow: the
	// Coffer-Next header, not part of the document.
	Next string `json:"-"`
}

// InventoryState is how old a connection's inventory is.
type InventoryState struct {
	Connection string `json:"connection"`
	// RefreshedAt is the last successful refresh, AgeSeconds its age
	// (absent: never listed yet).
	RefreshedAt time.Time `json:"refreshed_at,omitzero"`
	AgeSeconds  float64   `json:"age_seconds,omitempty"`
	// AttemptedAt is the last refresh tried; Error its error ("" when
	// it succeeded).
	AttemptedAt time.Time `json:"attempted_at,omitzero"`
	Error       string    `json:"error,omitempty"`
	// VMs is how many VMs the last successful refresh listed.
	VMs int `json:"vms"`
}

// ConnectionError is a connection that could not be listed.
type ConnectionError struct {
	Connection string `json:"connection"`
	Error      string `json:"error"`
}

// InventoryRefresh is the result of refreshing a connection's inventory.
type InventoryRefresh struct {
	Connection  string    `json:"connection"`
	RefreshedAt time.Time `json:"refreshed_at"`
	VMs         int       `json:"vms"`
	// Busy VMs could not be described (their last known state is kept).
	Busy int `json:"busy"`
}

// Finding is something a policy will do differently from what its
// settings seem to ask: an error refuses the configuration, a warning says
// what will really happen.
type Finding struct {
	Level   string `json:"level"` // error, warning
	Message string `json:"message"`
}

// PolicyCheck is the result of checking the configuration's policies.
type PolicyCheck struct {
	Valid          bool           `json:"valid"`
	Connections    int            `json:"connections"`
	Repositories   int            `json:"repositories"`
	ResourceGroups int            `json:"resource_groups"`
	Limits         Limits         `json:"limits"`
	Policies       []PolicyReport `json:"policies"`
	// Maintenance lists the scheduled maintenance jobs with their next
	// runs.
	Maintenance []MaintenanceReport `json:"maintenance"`
}

// MaintenanceReport is one scheduled maintenance job.
type MaintenanceReport struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"` // gc, verify, forget, copy, media-copy, verify-boot
	Repository string `json:"repository"`
	Schedule   string `json:"schedule"`
	// Window is the maintenance window ("" for none).
	Window string `json:"window,omitempty"`
	// ReadDataSeconds is a verify's read-data-period (0: no data read).
	ReadDataSeconds float64 `json:"read_data_period_seconds,omitempty"`
	// To is a copy's target repository.
	To string `json:"to,omitempty"`
	// After is the policy whose runs a copy follows (it has no
	// schedule and no next runs).
	After string `json:"after,omitempty"`
	// Library and Pool are a media copy's.
	Library  string       `json:"library,omitempty"`
	Pool     string       `json:"pool,omitempty"`
	NextRuns []PlannedRun `json:"next_runs"`
}

// PlannedRun is a run to come: Starts is false when its window will keep
// it from starting; a verify reads share Share of Shares of the packs.
type PlannedRun struct {
	At     time.Time `json:"at"`
	Starts bool      `json:"starts"`
	Share  int       `json:"share,omitempty"`
	Shares int       `json:"shares,omitempty"`
	// MediaSet is the media set (pool) a media copy's run writes to.
	MediaSet string `json:"media_set,omitempty"`
}

// Limits are the engine's concurrency and rate limits, defaults applied
// (0: no limit).
type Limits struct {
	Tasks         int   `json:"tasks"`
	PerHost       int   `json:"per_host"`
	PerDatastore  int   `json:"per_datastore"`
	PerRepository int   `json:"per_repository"`
	RateBytes     int64 `json:"rate_bytes_per_second"`
	TaskRateBytes int64 `json:"task_rate_bytes_per_second"`
	// MediaDrives are the media libraries' drive-limits by library, of
	// those that set one (the others write with every drive at once).
	MediaDrives map[string]int `json:"media_drives"`
}

// PolicyReport says what one policy will do.
type PolicyReport struct {
	Name      string   `json:"name"`
	Mode      string   `json:"mode"`
	FullEvery int      `json:"full_every,omitempty"`
	FullOn    []string `json:"full_on"`
	// SnapshotMode is the VM snapshot mode the policy asks for.
	SnapshotMode string    `json:"snapshot_mode"`
	Group        string    `json:"group,omitempty"`
	Repository   string    `json:"repository"`
	Schedule     string    `json:"schedule,omitempty"`
	NextRun      time.Time `json:"next_run,omitzero"`
	// Retention is the policy's keep rules.
	Retention string `json:"retention"`
	// LockSeconds is how long every point the policy makes is under
	// object lock (immutable-for); LockProblem says why the repository
	// cannot lock them (absent when it can, or offline).
	LockSeconds float64 `json:"lock_seconds,omitempty"`
	// RPOSeconds is the policy's recovery point objective (0: none).
	RPOSeconds  float64 `json:"rpo_seconds,omitempty"`
	LockProblem string  `json:"lock_problem,omitempty"`
	// Selected is absent offline (nothing was asked of the hypervisors).
	Selected []Selection `json:"selected,omitempty"`
	Warnings []Finding   `json:"warnings"`
}

// Selection is what a policy selects on one connection.
type Selection struct {
	Connection string   `json:"connection"`
	VMsTotal   int      `json:"vms_total"`
	VMs        []string `json:"vms"`
	Error      string   `json:"error,omitempty"`
}

// PolicyPreview says what running a policy would do now: the VMs it
// selects, its next runs, and what its retention would keep of the
// points it made so far.
type PolicyPreview struct {
	Policy    string      `json:"policy"`
	Selected  []Selection `json:"selected"`
	NextRuns  []time.Time `json:"next_runs"`
	Retention string      `json:"retention"`
	Warnings  []Finding   `json:"warnings"`
	// Sources is the retention verdict per VM (empty without keep rules).
	Sources []ForgetSource `json:"sources"`
}
