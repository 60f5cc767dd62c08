package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestS3ImmutableCopy copies a point of a local repository (which cannot
// lock) to an Object Lock bucket with --immutable-for: the copy is locked
// there with everything it needs, the target's keys cannot be removed,
// and after an attacker with the bucket's admin keys deleted all they
// could, the point restores byte-identically from the bucket and the
// password alone.
func TestS3ImmutableCopy(t *testing.T) {
	srv := testutil.StartS3(t)
	e := newEnv(t)
	for k, v := range srv.Env() {
		e.vars[k] = v
	}
	e.must("init")
	img := e.image("vm.img", 32<<20, 8)
	e.must("backup", "disk", img, "--name", "vm")
	bucket := srv.Bucket(t, true)
	target := "s3://" + bucket + "/offsite"
	const targetPassword = "offsite password"
	e.vars["COFFER_TO_PASSWORD"] = targetPassword
	saved := e.vars["COFFER_REPO"]
	e.vars["COFFER_REPO"], e.vars["COFFER_PASSWORD"] = target, targetPassword
	e.must("init")
	e.vars["COFFER_REPO"], e.vars["COFFER_PASSWORD"] = saved, "correct horse"

	// A target that cannot lock is refused before anything is copied.
	local := e.dir + "/second"
	e.vars["COFFER_REPO"], e.vars["COFFER_PASSWORD"] = local, targetPassword
	e.must("init")
	e.vars["COFFER_REPO"], e.vars["COFFER_PASSWORD"] = saved, "correct horse"
	if out := e.expect(ExitUsage, "copy", "--to", local, "--immutable-for", "3d"); !strings.Contains(out, "Object Lock") {
		t.Fatalf("copy --immutable-for to a local repository: %s", out)
	}
	if out := e.expect(ExitUsage, "copy", "--to", target, "--immutable-for", "-1d"); !strings.Contains(out, "positive duration") {
		t.Fatalf("negative --immutable-for: %s", out)
	}

	const d = 3 * 24 * time.Hour
	start := time.Now()
	res := e.copyTo(t, target, "--immutable-for", "3d")
	if len(res.Copied) != 1 {
		t.Fatalf("copy: %+v", res)
	}
	point := res.Copied[0]
	packs := requirePointLocked(t, srv, bucket, "offsite", targetPassword, point, start.Add(d))

	// The target's key opens locked points: removing it fails and says why
	// (a second key is added first, so it is not the last one). The new key
	// is locked as long as the first.
	e.vars["COFFER_REPO"], e.vars["COFFER_PASSWORD"] = target, targetPassword
	var keys []struct{ ID string }
	if err := json.Unmarshal([]byte(e.must("key", "list", "--json")), &keys); err != nil || len(keys) != 1 {
		t.Fatalf("keys: %+v %v", keys, err)
	}
	pw2 := filepath.Join(e.dir, "second.pw")
	if err := os.WriteFile(pw2, []byte("second offsite password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("key", "add", "--new-password-file", pw2)
	if out := e.expect(ExitFailure, "key", "remove", keys[0].ID[:8]); !strings.Contains(out, "opens immutable backup points") || !strings.Contains(out, "locked until") {
		t.Fatalf("removing a locked key: %s", out)
	}
	requirePointLocked(t, srv, bucket, "offsite", "second offsite password", point, start.Add(d))

	refused := attackRepository(t, srv, bucket, "offsite")
	restored := recoverAndRestore(t, e, point)
	if !sameFile(t, restored, img) {
		t.Fatal("the copied point restores different bytes after the attack")
	}
	t.Logf("%d packs locked; the attack was refused on %d versions", packs, refused)
}
