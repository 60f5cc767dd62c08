package job_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/job"
)

// Lines logged within LineInterval of the last ones written wait for it
// (a run's VMs ending tens a second cost a few writes a second), and
// Finish writes them at once.
func TestLinesWaitForTheLineInterval(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{LineInterval: time.Hour})
	ctx := context.Background()
	h := must[*job.Handle](t)(m.Start(ctx, job.Spec{Kind: job.KindVerify}))
	h.Logf("first")
	ok(t, h.Flush(ctx)) // the first lines go at once

	h.Logf("second")
	h.Logf("third")
	// Bounded: the lines wait for an hour, the flush for a moment.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := h.Flush(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lines logged just after others were written at once (flush: %v)", err)
	}
	same(t, "log before the end", messages(must[[]job.Line](t)(m.Log(ctx, h.ID(), 0, 0))), []string{"1:first"})
	must[job.Record](t)(h.Finish(ctx, catalog.StatusSuccess, ""))
	same(t, "log after the end", messages(must[[]job.Line](t)(m.Log(ctx, h.ID(), 0, 0))), []string{"1:first", "2:second", "3:third"})
}
