package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/console/restorewizard"
)

// The restore wizard of a backup point: what to restore (the whole VM as
// a new VM, onto the original, one disk, or instant recovery), then where
// and how, checked by the API when it is sent; a restore that starts
// sends the browser to its task's live page. Every step is an operation
// of the API (restore-vm, restore-disk, instant-start): the wizard only
// gathers their input.

type restoreView struct {
	Repo  string
	Point api.BackupPoint
	Kinds []restorewizard.Kind
	What  string
	// Why says why a kind is not offered for this point ("" when it is).
	Why     map[string]string
	Disks   []api.PointDisk
	Default struct{ Name, Dir, DiskTo string }
	restorewizard.Choice
}

// restoreWizard shows the wizard for one point.
func (p *page) restoreWizard() {
	pt, ok := p.point()
	if !ok {
		return
	}
	v := restoreView{Repo: p.repo(), Point: pt, Kinds: restorewizard.Kinds, What: p.r.URL.Query().Get("what"), Why: restorewizard.Limits(pt)}
	for _, d := range pt.Disks {
		if d.Kind != "memory" {
			v.Disks = append(v.Disks, d)
		}
	}
	v.Default.Name = pt.VM + "-restored"
	v.Default.Dir = restorewizard.SafeFile(pt.VM) + "-" + pt.ShortID
	if len(v.Disks) > 0 {
		v.Default.DiskTo = restorewizard.SafeFile(pt.VM) + "-" + pt.ShortID + "-" + restorewizard.SafeFile(v.Disks[0].Key) + ".raw"
	}
	if _, known := v.Why[v.What]; !known && v.What != "" {
		v.What = ""
	}
	if v.What == "vm" {
		v.Choice = restorewizard.Choose(p.api.call, pt, p.pointParams(), p.r.URL.Query(), v.Default.Dir)
	}
	p.show("restore", "Restore "+pt.VM+" from "+pt.ShortID, "restore", v)
}

func (p *page) pointParams() map[string]string {
	return map[string]string{"repo": p.repo(), "point": p.r.PathValue("point")}
}

// refuse shows a refusal of the wizard's own (a confirmation not given)
// where the step's answers go.
func (p *page) refuse(msg string) {
	p.fail(&apiError{Status: http.StatusBadRequest, Class: api.Invalid, Detail: msg})
}

// restoreVM restores the point as a new VM (restore-vm into a directory
// of the restore directory), or onto the original through its connection
// when the operator typed the VM's name to confirm it.
func (p *page) restoreVM() {
	f := p.form()
	body := api.RestoreVMRequest{Dir: strings.TrimSpace(f.Get("dir")), Name: strings.TrimSpace(f.Get("name")),
		Format: f.Get("format"), Start: f.Get("start") == "1"}
	var q url.Values
	if c := f.Get("connection"); c != "" {
		// Through a connection, of the point's platform or another.
		body = api.RestoreVMRequest{Name: body.Name, Start: body.Start, Datastore: strings.TrimSpace(f.Get("datastore")),
			Network: strings.TrimSpace(f.Get("network"))}
		q = url.Values{"connection": {c}}
	}
	if f.Get("onto_original") == "1" {
		vm := f.Get("vm")
		if vm == "" || strings.TrimSpace(f.Get("confirm")) != vm {
			p.refuse("type the VM's name, " + vm + ", to confirm that its disks are overwritten")
			return
		}
		body = api.RestoreVMRequest{OntoOriginal: true, ConfirmOverwrite: true, Start: f.Get("start") == "1"}
		q = url.Values{"connection": {f.Get("connection")}}
	}
	id, err := p.startTask("restore-vm", p.pointParams(), q, body, nil)
	p.started(id, err, "The VM is restored.")
}

// restoreDisk restores one disk of the point to a file (restore-disk).
func (p *page) restoreDisk() {
	f := p.form()
	body := api.RestoreRequest{Disk: f.Get("disk"), To: strings.TrimSpace(f.Get("to")), Format: f.Get("format"),
		Overwrite: f.Get("overwrite") == "1"}
	if body.Disk == "" {
		p.refuse("choose the disk to restore")
		return
	}
	if c := strings.TrimSpace(f.Get("copies")); c != "" && c != "1" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			p.refuse("copies is a whole number, 1 or more")
			return
		}
		body.Copies = n // the API says if there are too many
	}
	id, err := p.startTask("restore-disk", p.pointParams(), nil, body, nil)
	p.started(id, err, "The disk is restored.")
}

// started ends a wizard's step: the task's page once the operation has
// started, its refusal at the step otherwise.
func (p *page) started(id int64, err error, done string) {
	switch {
	case err != nil:
		p.fail(err)
	case id == 0:
		p.done(done, "/ui/tasks")
	default:
		p.toTask(id)
	}
}
