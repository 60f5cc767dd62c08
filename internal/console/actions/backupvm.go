package actions

import (
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// One VM backed up now, from the Inventory page, as `coffer backup vm`
// backs it up: into a repository of the configuration, in the mode
// chosen, as a task whose live page the browser follows. A VM's policies
// back it up on their schedules (and Run now on a policy's page runs all
// of its VMs); this is the one VM, now, when a person wants a point
// before a change.

type backupVMView struct {
	Connection, VM string
	Repos          []string
}

// backupModes are the modes the form offers, as the operation takes them.
var backupModes = []string{"incremental", "full", "differential"}

// snapshotModes are the snapshot modes the form offers (empty: the
// connection's default).
var snapshotModes = []string{"", "crash-consistent", "quiesced", "suspend", "as-is"}

// backupVMForm is the form that backs the VM up.
func backupVMForm(p Page) {
	v := backupVMView{Connection: p.Value("conn"), VM: p.Value("vm"), Repos: p.Repositories()}
	if len(v.Repos) == 0 {
		v.Repos = []string{"default"}
	}
	p.Show("backupvm", "Back up "+v.VM+" now", "inventory", v)
}

// backupVM starts the backup as a task.
func backupVM(p Page) {
	f := p.Form()
	repo := strings.TrimSpace(f.Get("repo"))
	body := api.BackupVMRequest{Mode: f.Get("mode"), SnapshotMode: f.Get("snapshot_mode"), NoHooks: f.Get("no_hooks") == "1"}
	switch {
	case repo == "":
		refuse(p, "choose the repository to back up into")
		return
	case !slices.Contains(backupModes, body.Mode):
		refuse(p, "the mode is incremental, full or differential")
		return
	case !slices.Contains(snapshotModes, body.SnapshotMode):
		refuse(p, "the snapshot mode is crash-consistent, quiesced, suspend or as-is")
		return
	}
	if f.Get("quiesce_required") == "1" {
		body.Quiesce = "required"
	}
	params := map[string]string{"repo": repo, "connection": p.Value("conn"), "vm": p.Value("vm")}
	id, err := p.StartTask("backup-vm", params, nil, body, nil)
	p.Started(id, err, p.Value("vm")+" is backed up.")
}
