package actions

import (
	"github.com/coffer-backup/coffer/internal/api"
)

// An instant recovery served again (instant-serve, as `coffer instant
// serve`): a session outlives the process that served its disks (a
// server restarted, or killed), and its VM waits, paused, for its reads.
// The Restore page offers this for a running session whose disks are not
// served; the server serves them again and resumes the VM.

// instantServe serves the session's disks again and resumes its VM. The
// server serves them from its default repository (the first of the
// configuration), which the request names for its access check: a
// session records its repository by ID, not by name.
func instantServe(p Page) {
	session, repo := p.Value("session"), "default"
	if rs := p.Repositories(); len(rs) > 0 {
		repo = rs[0]
	}
	var s api.InstantSession
	if err := p.Call("instant-serve", map[string]string{"repo": repo, "session": session}, nil, nil, &s); err != nil {
		p.Fail(err)
		return
	}
	p.Done("Session "+session+" is served again: "+s.VM+" resumes where it paused.", "/ui/restore")
}
