package catalogtest

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// CheckUpgradeFromV1 checks a catalog that a driver's upgrade test wrote
// at schema version 1, in that schema's columns (one backup job with one
// task of VM "web" that requested a quiesced snapshot and made point
// "old", and that point in repository "r"), then opened and so migrated:
// the old rows read back with no achieved snapshot mode (nothing recorded
// one then), and both modes are stored from then on.
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
