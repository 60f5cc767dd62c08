package vsphere

import "testing"

// Lab is this package's lab for the tests of this directory that run
// coffer's service (package vsphere_test: the service imports this
// package, so they cannot be tests of it): a simulator with VMs behind
// the CBT shim, which vcsim alone lacks, reached as a site reaches
// vCenter.
type Lab struct {
	s  *sim
	sh *cbtShim
}

// NewLab starts a simulator with vms running VMs of one disk of
// diskSize bytes each, behind the CBT shim.
func NewLab(t testing.TB, vms int, diskSize int64) *Lab {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: vms, DiskSize: diskSize})
	return &Lab{s: s, sh: newCBTShim(t, s)}
}

// URL is the SDK URL (through the shim), Thumbprint its certificate's,
// User and Password the credentials.
func (l *Lab) URL() string        { return l.sh.url.String() }
func (l *Lab) Thumbprint() string { return l.sh.thumb }
func (l *Lab) User() string       { return simUser }
func (l *Lab) Password() string   { return simPass }

// VM is the name and ID of the i-th VM.
func (l *Lab) VM(i int) (name, id string) { return l.s.vm(l.s.vms[i]).Name, l.s.vms[i].Value }

// Write writes data at off into the i-th VM's disk, tracked as ESXi's CBT
// would; Read returns the disk's bytes now.
func (l *Lab) Write(t testing.TB, i int, off int64, data []byte) {
	l.sh.write(t, l.s.vms[i], 0, off, data)
}
func (l *Lab) Read(t testing.TB, i int) []byte { return l.sh.read(t, l.s.vms[i], 0) }

// Snapshots counts the VM snapshots the i-th VM has.
func (l *Lab) Snapshots(i int) int { return len(l.s.snapshots(l.s.vms[i])) }
