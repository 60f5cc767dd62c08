package actions

import (
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// A replication run by hand (run-replication, as `coffer replicas run
// NAME`): the replications of the configuration, each with what it
// replicates where, its standbys (list-replicas, as `coffer replicas`:
// each one's restore points and its lag behind its VM, the RPO), and a
// button that brings its standbys to their VMs' newest backup points now,
// as a task whose page the browser follows. A replication with a schedule
// runs on its own too.

type replicationView struct {
	Name, Repository, Connection, Directory, Schedule string
	VMs                                               []string
	Standbys                                          []api.Replica
}

// replications lists the replications with their standbys and Run now
// buttons.
func replications(p Page) {
	var objs []api.ConfigObject
	if err := p.Call("list-replications", nil, nil, nil, &objs); err != nil {
		p.Fail(err)
		return
	}
	var standbys []api.Replica
	if err := p.Call("list-replicas", nil, nil, nil, &standbys); err != nil {
		p.Fail(err)
		return
	}
	var v []replicationView
	for _, o := range objs {
		if o.Overridden {
			continue
		}
		r := replicationView{Name: o.Name}
		r.Repository, _ = o.Spec["repository"].(string)
		r.Connection, _ = o.Spec["connection"].(string)
		r.Directory, _ = o.Spec["directory"].(string)
		r.Schedule, _ = o.Spec["schedule"].(string)
		vms, _ := o.Spec["vms"].([]any)
		for _, vm := range vms {
			if s, ok := vm.(string); ok {
				r.VMs = append(r.VMs, s)
			}
		}
		for _, sb := range standbys {
			if sb.Replication == r.Name {
				r.Standbys = append(r.Standbys, sb)
			}
		}
		v = append(v, r)
	}
	p.Show("replications", "Replications", "restore", v)
}

// runReplication runs one replication now, for every VM it names or the
// one VM given.
func runReplication(p Page) {
	var q url.Values
	if vm := strings.TrimSpace(p.Form().Get("vm")); vm != "" {
		q = url.Values{"vm": {vm}}
	}
	id, err := p.StartTask("run-replication", map[string]string{"name": p.Value("name")}, q, nil, nil)
	p.Started(id, err, "The replication ran.")
}
