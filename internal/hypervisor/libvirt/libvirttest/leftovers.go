// Package libvirttest holds what tests outside the libvirt connector's
// package check on a libvirt domain coffer backed up (the command line's
// and the workers' tests, as the connector's own conformance suite).
package libvirttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Leftovers lists what coffer left on domain dom of the daemon admin is
// connected to: a running backup job, a domain left paused, coffer's
// checkpoints beyond chain's own (its full anchor and newest
// incremental), coffer's snapshots, and journals, sockets or scratch
// files under the connector's state directory state. An empty list is a
// clean domain.
func Leftovers(admin *golibvirt.Libvirt, dom golibvirt.Domain, state, chain string) ([]string, error) {
	var left []string
	if _, err := admin.DomainBackupGetXMLDesc(dom, 0); err == nil {
		left = append(left, "a backup job")
	}
	st, _, err := admin.DomainGetState(dom, 0)
	if err != nil {
		return nil, err
	}
	if golibvirt.DomainState(st) != golibvirt.DomainRunning {
		left = append(left, fmt.Sprintf("domain in state %d", st))
	}
	cps, _, err := admin.DomainListAllCheckpoints(dom, -1, 0)
	if err != nil {
		return nil, err
	}
	prefix, kept := "coffer-"+hypervisor.ChainLabel(chain)+"-", 0
	for _, cp := range cps {
		switch {
		case strings.HasPrefix(cp.Name, prefix):
			if kept++; kept > 2 {
				left = append(left, "a third checkpoint of the chain "+cp.Name)
			}
		case strings.HasPrefix(cp.Name, "coffer-"):
			left = append(left, "checkpoint "+cp.Name)
		}
	}
	snaps, _, err := admin.DomainListAllSnapshots(dom, -1, 0)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		if strings.HasPrefix(s.Name, "coffer-") {
			left = append(left, "snapshot "+s.Name)
		}
	}
	for _, sub := range []string{"journal", "sockets"} {
		ents, _ := os.ReadDir(filepath.Join(state, sub)) // absent: nothing left there
		for _, e := range ents {
			left = append(left, filepath.Join(sub, e.Name()))
		}
	}
	return left, nil
}
