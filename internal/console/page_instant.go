package console

import (
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Instant recovery in the console: started from a point's restore wizard
// (instant-start), then watched on the restore page (instant-list, its
// table refreshed while it is open), committed onto storage while the VM
// runs (instant-commit, a task whose page the browser follows) or
// discarded (instant-discard).

type instantView struct {
	Sessions []api.InstantSession
	// Kept are the storage snapshots policies keep (page_storage.go).
	Kept []api.StorageSnapshot
}

func (p *page) instantSessions() ([]api.InstantSession, bool) {
	var ss []api.InstantSession
	if _, err := p.api.call("instant-list", nil, nil, nil, &ss); err != nil {
		p.fail(err)
		return nil, false
	}
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].Started.After(ss[j].Started) })
	return ss, true
}

// restorePage is where restores begin (a point's wizard) and where the
// instant recoveries running now are watched, committed and discarded.
func (p *page) restorePage() {
	ss, ok := p.instantSessions()
	if !ok {
		return
	}
	v := instantView{Sessions: ss}
	if p.htmx() {
		p.fragment("instant/sessions", v)
		return
	}
	v.Kept = p.keptStorageSnapshots()
	p.show("instant", "Restore", "restore", v)
}

// instantStart starts the point's VM from the backup and shows it among
// the sessions.
func (p *page) instantStart() {
	f := p.form()
	// A vSphere point's form asks where its VM runs (the others' have
	// none of these fields, which the API then leaves to its defaults).
	body := api.InstantStartRequest{Host: strings.TrimSpace(f.Get("host")), Name: strings.TrimSpace(f.Get("name")),
		NFSAddress: strings.TrimSpace(f.Get("nfs_address")), NFSListen: strings.TrimSpace(f.Get("nfs_listen"))}
	if s := strings.TrimSpace(f.Get("reconnect_delay")); s != "" {
		d, err := strconv.ParseFloat(s, 64)
		if err != nil || d < 0 {
			p.refuse("the reconnect delay is a number of seconds, 0 or more")
			return
		}
		body.ReconnectDelaySeconds = d
	}
	var s api.InstantSession
	if _, err := p.api.call("instant-start", p.pointParams(), nil, body, &s); err != nil {
		p.fail(err)
		return
	}
	p.redirect("/ui/restore#session-" + url.PathEscape(s.ID))
}

// instantCommit moves a recovered VM onto storage under the restore
// directory while it runs; the browser follows the commit's task.
func (p *page) instantCommit() {
	f := p.form()
	body := api.InstantCommitRequest{To: strings.TrimSpace(f.Get("to")), Format: f.Get("format")}
	id, err := p.startTask("instant-commit", map[string]string{"session": p.r.PathValue("session")}, nil, body, nil)
	p.started(id, err, "The VM runs from its new disks.")
}

// instantDiscard stops a recovered VM and deletes what it wrote.
func (p *page) instantDiscard() {
	id := p.r.PathValue("session")
	var s api.InstantSession
	if _, err := p.api.call("instant-discard", map[string]string{"session": id}, nil, nil, &s); err != nil {
		p.fail(err)
		return
	}
	msg := "Instant recovery " + id + " is discarded: its VM stopped and what it wrote is deleted."
	if s.State == "committed" {
		msg = "Instant recovery " + id + " is done: " + s.VM + " runs on from its committed disks."
	}
	p.done(msg, "/ui/restore")
}
