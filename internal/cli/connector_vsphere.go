package cli

import (
	"context"
	"path/filepath"
	"time"

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
//	      user: coffer-backup@vsphere.local       # the least-privilege role of the README
//	      password-file: /etc/coffer/vc1.password
//	      thumbprint: "AB:CD:..."                 # pin a self-signed certificate (SHA-256 or SHA-1)
//	      # ca-file: /etc/coffer/vc-ca.pem        # or trust a private CA
//	      # insecure: true                        # no TLS verification at all (labs only)
//	      snapshot-create-timeout: 30m
//	      snapshot-remove-timeout: 2h
//	      task-poll: 250ms
//	      read-connections: 4
//	      state-dir: /var/lib/coffer/vsphere      # snapshot journal for leftover cleanup
//
// TLS verification is on unless insecure is set; the password is only
// read from a file, so it never sits in the configuration.
type vsphereConnectionOptions struct {
	URL                   string        `yaml:"url"`
	User                  string        `yaml:"user"`
	PasswordFile          string        `yaml:"password-file"`
	Thumbprint            string        `yaml:"thumbprint"`
	CAFile                string        `yaml:"ca-file"`
	Insecure              bool          `yaml:"insecure"`
	SnapshotCreateTimeout time.Duration `yaml:"snapshot-create-timeout"`
	SnapshotRemoveTimeout time.Duration `yaml:"snapshot-remove-timeout"`
	QuiesceTimeout        time.Duration `yaml:"quiesce-timeout"`
	TaskPoll              time.Duration `yaml:"task-poll"`
	ReadConnections       int           `yaml:"read-connections"`
	StateDir              string        `yaml:"state-dir"`
}

func newVSphereConnector(ctx context.Context, cfg ConnectionConfig) (hypervisor.Connector, error) {
	var o vsphereConnectionOptions
	if err := cfg.DecodeOptions(&o); err != nil {
		return nil, err
	}
	if o.URL == "" || o.User == "" || o.PasswordFile == "" {
		return nil, usagef("connection %s: options url, user and password-file are required", cfg.Name)
	}
	state := o.StateDir
	if state == "" {
		state = filepath.Join(cfg.StateDir, "vsphere", cfg.Name)
	}
	return vsphere.New(ctx, vsphere.Config{URL: o.URL, User: o.User, PasswordFile: o.PasswordFile,
		Thumbprint: o.Thumbprint, CAFile: o.CAFile, Insecure: o.Insecure, StateDir: state,
		Timeouts: hypervisor.Timeouts{SnapshotCreate: o.SnapshotCreateTimeout, SnapshotRemove: o.SnapshotRemoveTimeout,
			Quiesce: o.QuiesceTimeout},
		TaskPoll: o.TaskPoll, ReadConnections: o.ReadConnections, Log: cfg.Logger})
}
