package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
)

// Interrupt stops a running policy run and records it failed,
// "interrupted: why", as a dead process's run is recorded (what a
// fleet's leader resumes); a job already ended is not touched.
func TestInterruptRecordsTheRunInterrupted(t *testing.T) {
	var br *blockingReads
	e := newEnv(t, fake.Options{Seed: 13, VMs: 3, DiskSize: 128 << 10, Allocated: 1}, nil, func(o *Options) {
		br = &blockingReads{Connector: o.Connectors["lab"], reading: make(chan string, 16)}
		o.Connectors = map[string]hypervisor.Connector{"lab": br}
	})
	job, err := e.eng.Start(context.Background(), testPolicy("interrupted"))
	if err != nil {
		t.Fatal(err)
	}
	<-br.reading
	if ids := e.eng.Interrupt("the test says so"); !slices.Equal(ids, []int64{job.ID()}) {
		t.Fatalf("Interrupt stopped %v, want [%d]", ids, job.ID())
	}
	res, err := job.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusFailed || !strings.HasPrefix(res.Job.Error, "interrupted: the test says so") {
		t.Fatalf("the interrupted run: %s %q", res.Job.Status, res.Job.Error)
	}
	if ids := e.eng.Interrupt("again"); len(ids) != 0 {
		t.Fatalf("Interrupt after the run ended stopped %v", ids)
	}
	e.noLeaks()
}
