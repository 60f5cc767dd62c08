package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vmware/govmomi/simulator"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// vcLab is the tests' vCenter (vclab) with what the command line's tests
// do through it.
type vcLab struct {
	*vclab.Lab
	t *testing.T
}

func newVCLab(t *testing.T, srv *simulator.Server) *vcLab {
	return &vcLab{Lab: vclab.New(t, srv), t: t}
}

// backUp configures e with a `vc` connection to the lab and a policy `p`
// selecting vm (snapshot mode extra, "" for the default, and policy keys
// such as "immutable-for: 1d" in more), runs it and returns the job.
func (l *vcLab) backUp(e *env, vm, snapshot string, more ...string) api.Job {
	l.t.Helper()
	mode := ""
	if snapshot != "" {
		mode = "\n    snapshot: " + snapshot
	}
	for _, m := range more {
		mode += "\n    " + m
	}
	e.config(l.connection(e) + fmt.Sprintf(`policies:
  - name: p
    connection: vc%s
    select: {names: [%q]}
`, mode, vm))
	var job api.Job
	if err := json.Unmarshal([]byte(e.must("run", "p", "--json")), &job); err != nil || job.Status != "success" {
		l.t.Fatalf("run: %+v %v", job, err)
	}
	return job
}

// connection is the configuration's connections section with a `vc`
// connection to the lab (its password in a file, the state directory in
// e's directory).
func (l *vcLab) connection(e *env) string {
	l.t.Helper()
	pw := filepath.Join(e.dir, "vc.password")
	e.vars["COFFER_STATE_DIR"] = filepath.Join(e.dir, "state")
	return l.Connection("vc", pw)
}

// restoreLatest restores the latest backup point as a new VM through the
// connection backUp configured.
func (l *vcLab) restoreLatest(e *env) api.RestoredVM {
	l.t.Helper()
	var res api.RestoredVM
	if err := json.Unmarshal([]byte(e.must("restore", "vm", "latest", "--connection", "vc", "--json")), &res); err != nil {
		l.t.Fatal(err)
	}
	return res
}
