package replicacmd_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// TestVSpherePlanRefusesWhatItCannotDo: a failover plan of standbys on a
// vSphere DR site is accepted by the configuration, and its planned
// failover and failback are refused with the reason before any job
// starts or vCenter is reached (its unplanned and test failovers run:
// internal/replica/vsstandby's TestPlanFailsOverStandbysInOrder and
// TestTestFailoverOfStandbyLeavesItUntouched).
func TestVSpherePlanRefusesWhatItCannotDo(t *testing.T) {
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
	for _, verb := range [][]string{{"planned"}, {"failback"}} {
		code, stdout, stderr := e.Run(append(append([]string{"failover"}, verb...), "shop")...)
		if code != command.ExitUsage || !strings.Contains(stdout+stderr, "on a vSphere DR site is not supported yet") {
			t.Errorf("failover %s: exit %d\n%s%s", verb[0], code, stdout, stderr)
		}
	}
	if out := e.Must("jobs"); strings.Contains(out, "failover") {
		t.Fatalf("a refused operation left a job:\n%s", out)
	}
}
