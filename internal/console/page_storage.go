package console

import (
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Storage snapshots that policies keep (keep-storage-snapshots) on the
// restore page: each is a restore point on the datastore itself, brought
// back by cloning a VM's disk files (restore-storage-snapshot, a task the
// browser follows) or deleted early (forget-storage-snapshot).

// keptStorageSnapshots lists them, newest first; a caller who may see no
// policy's just gets none (the rest of the page is theirs still).
func (p *page) keptStorageSnapshots() []api.StorageSnapshot {
	var kept []api.StorageSnapshot
	if _, err := p.api.call("list-storage-snapshots", nil, nil, nil, &kept); err != nil {
		return nil
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	return kept
}

// restoreFromStorage clones a VM's disk files out of a kept storage
// snapshot into a directory under the server's restore directory.
func (p *page) restoreFromStorage() {
	f := p.form()
	body := api.StorageRestoreRequest{VM: strings.TrimSpace(f.Get("vm")), To: strings.TrimSpace(f.Get("to")), Overwrite: f.Get("overwrite") == "1"}
	if body.VM == "" {
		p.refuse("choose the VM to restore")
		return
	}
	id, err := p.startTask("restore-storage-snapshot", map[string]string{"label": p.r.PathValue("label")}, nil, body, nil)
	p.started(id, err, "The VM's disks are back.")
}

// forgetStorageSnapshot deletes a kept storage snapshot now.
func (p *page) forgetStorageSnapshot() {
	var k api.StorageSnapshot
	if _, err := p.api.call("forget-storage-snapshot", map[string]string{"label": p.r.PathValue("label")}, nil, nil, &k); err != nil {
		p.fail(err)
		return
	}
	p.done("Storage snapshot "+k.Label+" of policy "+k.Policy+" is deleted.", "/ui/restore")
}
