package hypervisor

import "time"

// InstantOptions describe a VM a hypervisor manager (libvirt) runs from a
// backup point: each disk's overlay is backed by export KEY of the NBD
// server on Socket, where coffer serves the point.
type InstantOptions struct {
	Name      string // the new VM's name
	Datastore string // where the overlays go; "" = where the recorded disks were
	Socket    string // coffer's NBD server (unix socket)
	// Sizes are the disks' sizes by key (the overlays' sizes).
	Sizes map[string]int64
	// ReconnectDelay is how long the VM's reads wait for a lost server.
	ReconnectDelay time.Duration
}

// InstantVM is a VM running from a backup point.
type InstantVM struct {
	Ref VMRef
	// Overlays are the files taking the VM's writes, by disk key.
	Overlays map[string]string
}
