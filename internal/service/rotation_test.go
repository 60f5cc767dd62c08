package service_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// stepClock is a clock the test advances by hand: the scheduler's one
// timer fires when the test says so.
type stepClock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan time.Duration
	fire  chan time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.waits <- d
	return c.fire
}

func (c *stepClock) tick() {
	d := <-c.waits
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	c.fire <- now
}

// TestVerifyRotationReadsEveryPack schedules a daily verify with a
// read-data-period of a week and drives a week of it with a hand-moved
// clock: each run is a verify task reading its share of the packs, and
// the seven shares read every pack of the repository exactly once.
func TestVerifyRotationReadsEveryPack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	s := operations.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, "repo"), Password: pw},
		Catalog: filepath.Join(dir, "catalog.db"), StateDir: filepath.Join(dir, "state"), Engine: &policy.Config{}, Local: true})
	defer s.Close()
	if _, err := (repoops.Ops{Service: s}).InitWith(ctx, &api.InitRepositoryInput{Body: api.InitRequest{PackSizeBytes: 256 << 10}}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		img := filepath.Join(dir, fmt.Sprintf("d%d.img", i))
		data := make([]byte, 3<<20)
		_, _ = rand.Read(data)
		if err := os.WriteFile(img, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := (backupops.Ops{Service: s}).BackupDisk(ctx, &api.BackupDiskInput{Body: api.BackupDiskRequest{Paths: []string{img}, Name: fmt.Sprintf("d%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := repoops.Ops{Service: s}.Stats(ctx, &api.RepoParam{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Packs < 14 {
		t.Fatalf("only %d packs: too few to show a rotation", st.Packs)
	}
	mcfg := &maintenance.Config{Repositories: []maintenance.Repository{{Repository: "default",
		Verify: &maintenance.VerifyJob{Common: maintenance.Common{Schedule: "0 3 * * *"}, ReadDataPeriod: policy.Duration(7 * 24 * time.Hour)}}}}
	jobs, err := mcfg.Jobs(&policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Start just before a period, so that its seven runs follow.
	week := 7 * 24 * time.Hour
	start := time.Unix(0, 0).UTC().Add(time.Duration(time.Now().UnixNano()/int64(week)+1) * week).Add(-time.Hour)
	clock := &stepClock{now: start, waits: make(chan time.Duration), fire: make(chan time.Time)}
	var mu sync.Mutex
	var shares []int64
	ended := make(chan struct{}, 8)
	sched := &maintenance.Scheduler{Jobs: jobs, Now: clock.Now, After: clock.After,
		Runner: func(ctx context.Context, j maintenance.Job, r maintenance.Run) error {
			mu.Lock()
			shares = append(shares, int64(r.Share))
			mu.Unlock()
			return fleetops.Ops{Service: s}.RunMaintenance(ctx, j, r)
		},
		Finished: func(maintenance.Job, maintenance.Run, error) { ended <- struct{}{} }}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sched.Run(runCtx) }()
	for range 7 {
		clock.tick()
		<-ended
	}
	cancel()
	<-clock.waits
	<-done

	// Each run is a verify task; its log says which scheduled run it was
	// and how many packs it read.
	tasks, err := servicetest.ListJobs(ctx, s, &api.ListJobsInput{Kind: "verify"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 7 {
		t.Fatalf("%d verify tasks, want 7", len(tasks))
	}
	var total int64
	for _, tk := range tasks {
		j, err := servicetest.WholeJob(ctx, s, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != "success" || j.Object != "/repositories/default" {
			t.Fatalf("verify task %d: %s on %s", j.ID, j.Status, j.Object)
		}
		var scheduled, verified bool
		for _, ev := range j.Events {
			switch ev.Message {
			case "verified":
				verified = true
				total += int64(ev.Fields["packs_read"].(float64))
			}
			scheduled = scheduled || ev.Fields["schedule"] == "default/verify"
		}
		if !scheduled || !verified {
			t.Fatalf("verify task %d's log: %+v", j.ID, j.Events)
		}
	}
	if total != int64(st.Packs) {
		t.Fatalf("the week's verifies read %d packs, the repository has %d", total, st.Packs)
	}
	seen := map[int64]bool{}
	for _, sh := range shares {
		seen[sh] = true
	}
	if len(seen) != 7 {
		t.Fatalf("shares %v, want 1..7 once each", shares)
	}
}
