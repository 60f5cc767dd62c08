package replicacmd_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// TestVSpherePlanRefusesFailbackToANewLocation: a failover plan of
// standbys on a vSphere DR site is accepted by the configuration, and its
// failback to a new location is refused with the reason before any job
// starts or vCenter is reached (its other operations run:
// TestVSpherePlannedFailoverThenFailback, and internal/replica/vsstandby's
// TestPlanFailsOverStandbysInOrder and
// TestTestFailoverOfStandbyLeavesItUntouched).
func TestVSpherePlanRefusesFailbackToANewLocation(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	pw := filepath.Join(e.Dir, "vc.password")
	e.Config(`connections:
  - {name: vc, kind: vsphere, options: {url: "https://127.0.0.1:9/sdk", user: u, password-file: ` + pw + `, data-mover-vm: dr-mover}}
replications:
  - {name: web-vs, vms: [web-01], connection: vc, storage: {ds1: dr-ds1}}
failover-plans:
  - {name: shop, replication: web-vs, groups: [{vms: [{name: web-01, address: 10.20.0.5}], probes: ["tcp:80"]}]}
`)
	code, stdout, stderr := e.Run("failover", "failback", "shop", "--to", e.Dir)
	if code != command.ExitUsage || !strings.Contains(stdout+stderr, "a failback to a new location (--to) of a plan whose standbys are on a vSphere DR site is not supported") {
		t.Errorf("failover failback --to: exit %d\n%s%s", code, stdout, stderr)
	}
	if out := e.Must("jobs"); strings.Contains(out, "failover") {
		t.Fatalf("a refused operation left a job:\n%s", out)
	}
}
