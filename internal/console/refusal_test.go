package console_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleShowsRefusals: the console shows what the API refuses, as
// the API refuses it. A RestoreOperator can browse and download files
// but not run a policy (Policy.Run) nor change one in the editor
// (Policy.Modify), which it may read; a BackupOperator can run it but not
// read data out of a point (Repo.Read): each sees the refusal, with the
// privilege it lacks, where it acted.
func TestConsoleShowsRefusals(t *testing.T) {
	l := newLab(t)
	l.config(tourConfig)
	img := l.ext4Image("web-disk", map[string][]byte{"etc/motd": []byte("only restore operators read this\n")})
	l.coffer("init")
	l.coffer("backup", "disk", img, "--name", "files")
	weekly := filepath.Join(l.dir, "weekly.yaml")
	if err := os.WriteFile(weekly, []byte("{name: weekly, connection: lab, select: {names: [db-*]}, retention: {keep-last: 4}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.coffer("config", "create", "policy", "-f", weekly)
	pwFile := filepath.Join(l.dir, "pw")
	for user, role := range map[string]string{"restoreop": "RestoreOperator", "backupop": "BackupOperator"} {
		if err := os.WriteFile(pwFile, []byte(user+" pass phrase"), 0o600); err != nil {
			t.Fatal(err)
		}
		l.coffer("user", "create", user, "--password-file", pwFile)
		l.coffer("acl", "set", "/", user, role)
	}
	l.start()

	restore := l.chrome()
	restore.signIn("restoreop", "restoreop pass phrase")
	restore.open("/ui/policies/nightly")
	restore.run(chromedp.Click("#run-now"))
	restore.waitText("#run-result", "Refused")
	restore.waitText("#run-result", "Policy.Run")
	restore.shot("refused-run")
	// It reads the policy in the editor, and saving is refused.
	restore.open("/ui/policies/weekly/edit")
	restore.waitText("#draft", "Valid")
	restore.retype("#p-keep-last", "9")
	restore.clickAway("#save-policy")
	restore.waitText("main", "Refused")
	restore.waitText("main", "Policy.Modify")
	restore.shot("refused-policy-edit")
	restore.open("/ui/points/default/vm/files")
	restore.run(chromedp.Click("#points tbody tr a"), chromedp.Click("#browse-files"), chromedp.WaitVisible("#files"))
	restore.run(chromedp.Click(`#files a.dir[href*="etc"]`), chromedp.Click(`#files a[aria-label="Download motd"]`))
	if got, _ := restore.download(); string(got) != "only restore operators read this\n" {
		t.Fatalf("the restore operator's download: %q", got)
	}

	backup := l.chrome()
	backup.signIn("backupop", "backupop pass phrase")
	backup.open("/ui/points/default/vm/files")
	backup.run(chromedp.Click("#points tbody tr a"), chromedp.WaitVisible("#browse-files"))
	point := backup.location()
	backup.run(chromedp.Click("#browse-files"), chromedp.WaitVisible(".notice.denied"))
	backup.waitText("main", "Refused")
	backup.waitText("main", "Repo.Read")
	backup.shot("refused-files")
	// The download itself is refused the same way, whatever the link.
	backup.run(chromedp.Navigate(point + "/download?path=%2Fetc%2Fmotd"))
	backup.waitText("main", "Repo.Read")
	// And what the role may do works: the run starts.
	backup.open("/ui/policies/nightly")
	backup.run(chromedp.Click("#run-now"), chromedp.WaitVisible("#task-status"))
}
