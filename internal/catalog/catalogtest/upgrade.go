package catalogtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// CheckUpgradeFromV1 checks a catalog that a driver's upgrade test wrote
// at schema version 1, in that schema's columns (one backup job with one
// task of VM "web" that requested a quiesced snapshot and made point
// "old", and that point in repository "r"; the job's events "first" and
// "second" with an event of no job between them), then opened and so
// migrated: the old rows read back with no achieved snapshot mode
// (nothing recorded one then), and both modes are stored from then on;
// the job is a run of a policy (kind backup-policy), its events are its
// log, numbered in the order they were recorded, and new lines follow.
func CheckUpgradeFromV1(t *testing.T, c catalog.Catalog) {
	t.Helper()
	ctx := context.Background()
	ps, err := c.ListBackupPoints(ctx, catalog.BackupPointFilter{Repository: "r"})
	ok(t, err)
	if len(ps) != 1 || ps[0].ID != "old" || ps[0].VMName != "web" || ps[0].Mode != "full" ||
		ps[0].SnapshotMode != "" || ps[0].SnapshotModeAchieved != "" {
		t.Fatalf("version 1 point after the upgrade: %+v", ps)
	}
	tasks, err := c.ListTasks(ctx, catalog.TaskFilter{})
	ok(t, err)
	if len(tasks) != 1 || tasks[0].SnapshotMode != "quiesced" || tasks[0].BackupPointID != "old" || tasks[0].SnapshotModeAchieved != "" {
		t.Fatalf("version 1 task after the upgrade: %+v", tasks)
	}

	j, err := c.GetJob(ctx, tasks[0].JobID)
	ok(t, err)
	if j.Kind != catalog.KindBackupPolicy || j.LogLines != 2 {
		t.Fatalf("version 1 job after the upgrade: kind %q, %d log lines", j.Kind, j.LogLines)
	}
	ok(t, c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "note", Message: "third"}}))
	lines, err := c.JobLog(ctx, j.ID, 0, 0)
	ok(t, err)
	var numbered []string
	for _, l := range lines {
		numbered = append(numbered, fmt.Sprintf("%d:%s", l.Seq, l.Message))
	}
	same(t, "log of the version 1 job", numbered, []string{"1:first", "2:second", "3:third"})

	p := ps[0]
	p.SnapshotMode, p.SnapshotModeAchieved = "quiesced", "crash-consistent"
	ok(t, c.PutBackupPoints(ctx, []catalog.BackupPoint{p}))
	ps, err = c.ListBackupPoints(ctx, catalog.BackupPointFilter{Repository: "r"})
	ok(t, err)
	same(t, "point rewritten after the upgrade", ps, []catalog.BackupPoint{p})
	task := tasks[0]
	task.SnapshotModeAchieved = "crash-consistent"
	ok(t, c.UpdateTasks(ctx, []*catalog.Task{&task}))
	got, err := c.GetTask(ctx, task.ID)
	ok(t, err)
	same(t, "task rewritten after the upgrade", got, task)
}
