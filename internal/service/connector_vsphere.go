package service

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

// vsphereOptions decodes and checks a connection's options without
// connecting, so a bad one is a configuration error before anything runs.
func vsphereOptions(cfg ConnectionConfig) (vsphereConnectionOptions, error) {
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
	if o.ReadConnections < 0 {
		add("options.read-connections must not be negative (0 means the default, 4)")
	}
	return o, errors.Join(errs...)
}

func newVSphereConnector(ctx context.Context, cfg ConnectionConfig) (hypervisor.Connector, error) {
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
		TaskPoll: o.TaskPoll, ReadConnections: o.ReadConnections, Log: cfg.Logger})
}
