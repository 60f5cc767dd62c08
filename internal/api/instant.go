package api

import "time"

// InstantSession is an instant recovery: a VM running from a backup point.
type InstantSession struct {
	ID         string        `json:"id"`
	PointID    string        `json:"point_id"`
	Repository string        `json:"repository"`
	VM         string        `json:"vm"`
	Dir        string        `json:"dir"`
	NBDSocket  string        `json:"nbd_socket"`
	QMPSocket  string        `json:"qmp_socket"`
	Console    string        `json:"console"`
	ServerPID  int           `json:"server_pid"`
	VMPID      int           `json:"vm_pid"`
	Disks      []InstantDisk `json:"disks"`
	State      string        `json:"state"` // running, committing, committed
	Started    time.Time     `json:"started"`
	// Targets are the production files after a commit.
	Targets       []string `json:"targets"`
	ServerRunning bool     `json:"server_running"`
	VMRunning     bool     `json:"vm_running"`
	// Connection, Domain and DomainID name the VM when it runs as a
	// libvirt domain (qmp_socket, console and vm_pid are then empty).
	Connection string `json:"connection,omitempty"`
	Domain     string `json:"domain,omitempty"`
	DomainID   string `json:"domain_id,omitempty"`
	// Platform is vsphere when the VM runs on an ESXi host from coffer's
	// NFS export: connection is the vSphere connection, domain and
	// domain_id the VM, datastore the export's NAS datastore, and
	// nfs_address the address the host mounts it from.
	Platform   string `json:"platform,omitempty"`
	Datastore  string `json:"datastore,omitempty"`
	NFSAddress string `json:"nfs_address,omitempty"`
}

// InstantDisk is one disk of a recovered VM.
type InstantDisk struct {
	Key       string `json:"key"`
	SizeBytes int64  `json:"size_bytes"`
	Overlay   string `json:"overlay"`
}
