package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// The restore wizard of a backup point: what to restore (the whole VM as
// a new VM, onto the original, one disk, or instant recovery), then where
// and how, checked by the API when it is sent; a restore that starts
// sends the browser to its task's live page. Every step is an operation
// of the API (restore-vm, restore-disk, instant-start): the wizard only
// gathers their input.

// restoreKinds are the wizard's first step, in the order it offers them.
var restoreKinds = []restoreKind{
	{"vm", "As a new VM", "The VM made again from its recorded configuration, with a new name, UUID and MAC addresses, its disks restored into it: in a directory of the server (QEMU), or through a connection, of its own platform or another (a vSphere VM as a libvirt domain, a QEMU or libvirt VM on vSphere); started if you ask."},
	{"original", "Onto the original VM", "The backup written over the disks of the original VM, which must be powered off. What it holds now is lost."},
	{"disk", "One disk", "One disk restored as a file (raw or qcow2) in the server's restore directory."},
	{"instant", "Instant recovery", "The VM started at once from the backup (its disks read from the repository, its writes kept aside); then commit it onto storage while it runs, or discard it."},
}

type restoreKind struct{ ID, Title, About string }

type restoreView struct {
	Repo  string
	Point api.BackupPoint
	Kinds []restoreKind
	What  string
	// Why says why a kind is not offered for this point ("" when it is).
	Why     map[string]string
	Disks   []api.PointDisk
	Default struct{ Name, Dir, DiskTo string }
	// Targets are the connections "as a new VM" can restore through;
	// Target the chosen one (none: a directory of the server), Mapping
	// its report onto another platform (MappingErr why there is none),
	// Network the target network asked for.
	Targets    []restoreTarget
	Target     restoreTarget
	Mapping    *api.VMMapping
	MappingErr string
	Network    string
	// Platform is the point's VM's: qemu, vsphere, libvirt; MapTo the
	// platform Mapping maps it onto.
	Platform, MapTo string
	dry             api.RestoredVM
}

// restoreWizard shows the wizard for one point.
func (p *page) restoreWizard() {
	pt, ok := p.point()
	if !ok {
		return
	}
	v := restoreView{Repo: p.repo(), Point: pt, Kinds: restoreKinds, What: p.r.URL.Query().Get("what"), Why: restoreLimits(pt)}
	for _, d := range pt.Disks {
		if d.Kind != "memory" {
			v.Disks = append(v.Disks, d)
		}
	}
	v.Default.Name = pt.VM + "-restored"
	v.Default.Dir = safeFile(pt.VM) + "-" + pt.ShortID
	if len(v.Disks) > 0 {
		v.Default.DiskTo = safeFile(pt.VM) + "-" + pt.ShortID + "-" + safeFile(v.Disks[0].Key) + ".raw"
	}
	if _, known := v.Why[v.What]; !known && v.What != "" {
		v.What = ""
	}
	if v.What == "vm" {
		p.chooseTarget(&v)
	}
	p.show("restore", "Restore "+pt.VM+" from "+pt.ShortID, "restore", v)
}

// restoreLimits says which kinds a point cannot be restored as, and why
// (the API would refuse them with the same reason; the wizard says it
// before the operator fills a form).
func restoreLimits(pt api.BackupPoint) map[string]string {
	why := map[string]string{"vm": "", "original": "", "disk": "", "instant": ""}
	switch pt.SourceKind {
	case "disk":
		why["vm"] = "this point holds disk images, not a VM: restore its disks"
		why["original"] = why["vm"]
		why["instant"] = why["vm"]
	case "qemu":
		why["original"] = "a QEMU VM is restored as a new VM; its disks are files you can restore one by one"
	default:
		why["instant"] = "instant recovery runs QEMU VMs"
	}
	if pt.Connection == "" && pt.SourceKind != "qemu" && pt.SourceKind != "disk" {
		why["original"] = "the point names no connection to restore through"
	}
	return why
}

// safeFile keeps what may go in a file name of the restore directory.
func safeFile(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
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
