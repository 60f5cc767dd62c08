package clitest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vmware/govmomi/simulator"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// VCLab is the tests' vCenter (vclab) with what the command line's tests
// do through it.
type VCLab struct {
	*vclab.Lab
	t *testing.T
}

// NewVCLab is the lab on the simulated vCenter srv.
func NewVCLab(t *testing.T, srv *simulator.Server) *VCLab {
	return &VCLab{Lab: vclab.New(t, srv), t: t}
}

// BackUp configures e with a `vc` connection to the lab and a policy `p`
// selecting vm (snapshot mode extra, "" for the default, and policy keys
// such as "immutable-for: 1d" in more), runs it and returns the job.
func (l *VCLab) BackUp(e *Env, vm, snapshot string, more ...string) api.Job {
	l.t.Helper()
	mode := ""
	if snapshot != "" {
		mode = "\n    snapshot: " + snapshot
	}
	for _, m := range more {
		mode += "\n    " + m
	}
	e.Config(l.Connections(e) + fmt.Sprintf(`policies:
  - name: p
    connection: vc%s
    select: {names: [%q]}
`, mode, vm))
	var job api.Job
	if err := json.Unmarshal([]byte(e.Must("run", "p", "--json")), &job); err != nil || job.Status != "success" {
		l.t.Fatalf("run: %+v %v", job, err)
	}
	return job
}

// Connections is the configuration's connections section with a `vc`
// connection to the lab (its password in a file, the state directory in
// e's directory).
func (l *VCLab) Connections(e *Env) string {
	l.t.Helper()
	pw := filepath.Join(e.Dir, "vc.password")
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	return l.Connection("vc", pw)
}

// RestoreLatest restores the latest backup point as a new VM through the
// connection BackUp configured.
func (l *VCLab) RestoreLatest(e *Env) api.RestoredVM {
	l.t.Helper()
	var res api.RestoredVM
	if err := json.Unmarshal([]byte(e.Must("restore", "vm", "latest", "--connection", "vc", "--json")), &res); err != nil {
		l.t.Fatal(err)
	}
	return res
}
