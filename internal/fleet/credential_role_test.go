package fleet_test

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/fleet"
)

func TestWorkerOfDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://coffer_worker_kvm1:secret@db/coffer":        "kvm1",
		"postgresql://db/coffer?user=coffer_worker_kvm-2":       "kvm-2",
		"postgres://coffer:pw@db/coffer":                        "",
		"postgres://db/coffer":                                  "",
		"postgres://coffer_worker_:pw@db/coffer":                "",
		"postgres://coffer_worker_KVM:pw@db/coffer":             "",
		"host=db user=coffer_worker_kvm1 dbname=coffer":         "",
		"postgres://coffer:pw@db/coffer?user=coffer_worker_kvm": "",
	} {
		name, ok := fleet.WorkerOfDSN(dsn)
		if ok != (want != "") || name != want && ok {
			t.Errorf("WorkerOfDSN(%q) = %q, %v; want %q", dsn, name, ok, want)
		}
	}
}
