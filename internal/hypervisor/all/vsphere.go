package all

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
)

// vsphereConnectionOptions are the options of a `kind: vsphere` connection
// (vCenter, or a single ESXi host):
//
//	connections:
//	  - name: vc1
//	    kind: vsphere
//	    options:
//	      url: https://vcenter.example.com/sdk
//	      user: coffer-backup@vsphere.local       # the least-privilege role of docs/03-hypervisors.md
//	      password-file: /etc/coffer/vc1.password
//	      thumbprint: "AB:CD:..."                 # pin a self-signed certificate (SHA-256 or SHA-1)
//	      # ca-file: /etc/coffer/vc-ca.pem        # or trust a private CA
//	      # insecure: true                        # no TLS verification at all (labs only)
//	      snapshot-create-timeout: 30m
//	      snapshot-remove-timeout: 2h
//	      task-poll: 250ms
//	      read-connections: 4
//	      read-from: host                         # vCenter connections: read disks and memory files from the ESXi
//	                                              # host running the VM, upload restores to the VM's host (vCenter
//	                                              # tickets); host-only, or vcenter (the old path)
//	      # host-user: root                       # log in to the hosts instead of vCenter tickets
//	      # host-password-file: /etc/coffer/esx.password
//	      # host-addresses: {esx-01.example.com: 10.0.0.11}   # where a host's management address is not routable
//	      # host-thumbprints: {esx-01.example.com: "AB:CD:..."}
//	      # guest-user: backup-hooks               # the guest account guest hooks run as (VMware Tools)
//	      # guest-password-file: /etc/coffer/guest.password
//	      # data-mover-vm: coffer-proxy            # coffer runs in this VM: read disks by hot-add
//	      state-dir: /var/lib/coffer/vsphere      # snapshot journal for leftover cleanup
//
// TLS verification is on unless insecure is set; the password is only
// read from a file, so it never sits in the configuration.
type vsphereConnectionOptions struct {
	URL                   string            `yaml:"url"`
	User                  string            `yaml:"user"`
	PasswordFile          string            `yaml:"password-file"`
	Thumbprint            string            `yaml:"thumbprint"`
	CAFile                string            `yaml:"ca-file"`
	Insecure              bool              `yaml:"insecure"`
	SnapshotCreateTimeout time.Duration     `yaml:"snapshot-create-timeout"`
	SnapshotRemoveTimeout time.Duration     `yaml:"snapshot-remove-timeout"`
	QuiesceTimeout        time.Duration     `yaml:"quiesce-timeout"`
	TaskPoll              time.Duration     `yaml:"task-poll"`
	ReadConnections       int               `yaml:"read-connections"`
	StateDir              string            `yaml:"state-dir"`
	ReadFrom              string            `yaml:"read-from"`
	HostUser              string            `yaml:"host-user"`
	HostPasswordFile      string            `yaml:"host-password-file"`
	HostAddresses         map[string]string `yaml:"host-addresses"`
	HostThumbprints       map[string]string `yaml:"host-thumbprints"`
	DataMoverVM           string            `yaml:"data-mover-vm"`
	GuestUser             string            `yaml:"guest-user"`
	GuestPasswordFile     string            `yaml:"guest-password-file"`
}

// vsphereOptions decodes and checks a connection's options without
// connecting, so a bad one is a configuration error before anything runs.
func vsphereOptions(cfg Config) (vsphereConnectionOptions, error) {
	var o vsphereConnectionOptions
	if err := cfg.DecodeOptions(&o); err != nil {
		return o, err
	}
	var errs []error
	add := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("connection %s: "+format, append([]any{cfg.Name}, a...)...))
	}
	if o.URL == "" || o.User == "" || o.PasswordFile == "" {
		add("options url, user and password-file are required")
	}
	// insecure turns certificate verification off, so a CA file would be
	// ignored; a pinned thumbprint is checked on every handshake whatever
	// insecure says (vsphere.New), so insecure would be. Neither
	// combination may silently not do what it reads as.
	if o.Insecure && o.CAFile != "" {
		add("options insecure and ca-file contradict each other (insecure skips the check the CA file is for): remove one")
	}
	if o.Insecure && o.Thumbprint != "" {
		add("options insecure and thumbprint contradict each other (the thumbprint is still checked, so insecure does nothing): remove insecure")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"snapshot-create-timeout", o.SnapshotCreateTimeout}, {"snapshot-remove-timeout", o.SnapshotRemoveTimeout},
		{"quiesce-timeout", o.QuiesceTimeout}, {"task-poll", o.TaskPoll}} {
		if d.v < 0 {
			add("options.%s must not be negative (0 means the default)", d.key)
		}
	}
	switch o.ReadFrom {
	case "", vsphere.ReadFromHost, vsphere.ReadFromHostOnly, vsphere.ReadFromVCenter:
	default:
		add("options.read-from %q: host (the ESXi host running the VM, vCenter when it cannot be reached), host-only or vcenter", o.ReadFrom)
	}
	if (o.HostUser == "") != (o.HostPasswordFile == "") {
		add("options host-user and host-password-file go together (without them, vCenter service tickets authorise the reads)")
	}
	if (o.GuestUser == "") != (o.GuestPasswordFile == "") {
		add("options guest-user and guest-password-file go together (the guest account VMware Tools runs guest hooks as)")
	}
	if o.ReadFrom == vsphere.ReadFromVCenter && (o.HostUser != "" || len(o.HostAddresses) > 0 || len(o.HostThumbprints) > 0) {
		add("options.read-from: vcenter reads nothing from the hosts, so host-user, host-addresses and host-thumbprints do nothing: remove them or read-from")
	}
	if o.ReadConnections < 0 {
		add("options.read-connections must not be negative (0 means the default, 4)")
	}
	return o, errors.Join(errs...)
}

func newVSphereConnector(ctx context.Context, cfg Config) (hypervisor.Connector, error) {
	o, err := vsphereOptions(cfg)
	if err != nil {
		return nil, api.WithClass(api.Invalid, err)
	}
	state := o.StateDir
	if state == "" {
		state = filepath.Join(cfg.StateDir, "vsphere", cfg.Name)
	}
	return vsphere.New(ctx, vsphere.Config{URL: o.URL, User: o.User, PasswordFile: o.PasswordFile,
		Thumbprint: o.Thumbprint, CAFile: o.CAFile, Insecure: o.Insecure, StateDir: state,
		Timeouts: hypervisor.Timeouts{SnapshotCreate: o.SnapshotCreateTimeout, SnapshotRemove: o.SnapshotRemoveTimeout,
			Quiesce: o.QuiesceTimeout},
		TaskPoll: o.TaskPoll, ReadConnections: o.ReadConnections, Log: cfg.Logger,
		ReadFrom: o.ReadFrom, HostUser: o.HostUser, HostPasswordFile: o.HostPasswordFile,
		HostAddresses: o.HostAddresses, HostThumbprints: o.HostThumbprints, DataMoverVM: o.DataMoverVM,
		GuestUser: o.GuestUser, GuestPasswordFile: o.GuestPasswordFile})
}

// VSphereGuestUser is the guest account a vSphere connection's guest
// hooks run as ("" for none). Options that do not decode are an error,
// which the kind's Check reports.
func VSphereGuestUser(cfg Config) (string, error) {
	o, err := vsphereOptions(cfg)
	return o.GuestUser, err
}
