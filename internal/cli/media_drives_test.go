package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

// media copy --drives 2 writes a session through each of two drives at
// once, on cartridges of their own; every volume verifies against the
// catalogue and every point restores from tape. More drives than the
// library has is refused before anything is written.
func TestMediaCopyThroughTwoDrives(t *testing.T) {
	e := newEnv(t)
	e.must("init")
	imgs := map[string]string{}
	for i, name := range []string{"a", "b", "c"} {
		imgs[name] = e.image(name+".img", int64(4+i)<<20, 2+i)
		e.must("backup", "disk", imgs[name], "--name", name)
	}
	lib := filepath.Join(e.dir, "vtl")
	e.must("media", "vtl", "create", lib, "--drives", "2", "--slots", "6", "--capacity", "64MiB")
	for i := 1; i <= 4; i++ {
		e.must("media", "vtl", "add", lib, "CFR00"+string(rune('0'+i))+"L8", "--slot", string(rune('0'+i)))
	}
	if code, _, errOut := e.run("media", "copy", "--library", lib, "--pool", "p", "--drives", "3"); code != 2 || !strings.Contains(errOut, "no drive 2") {
		t.Fatalf("--drives 3 on a library of 2: exit %d, %s", code, errOut)
	}
	res := decode[api.MediaCopyResult](t, e.must("media", "copy", "--library", lib, "--pool", "p", "--drives", "2", "--json"))
	if res.Drives != 2 || len(res.Sessions) != 2 || res.Sessions[0] == res.Sessions[1] || len(res.Copied) != 3 || len(res.Volumes) != 2 ||
		res.Volumes[0].Barcode == res.Volumes[1].Barcode {
		t.Fatalf("copy through two drives: %+v", res)
	}
	for _, v := range res.Volumes {
		rep := decode[api.MediaVerifyReport](t, e.must("media", "verify", "--library", lib, v.Barcode, "--json"))
		if !rep.OK || !rep.CatalogueMatches {
			t.Fatalf("verify %s: %+v", v.Barcode, rep)
		}
	}
	for _, p := range snapshotsJSON(t, e) {
		out := filepath.Join(e.dir, "restored-"+p.VM)
		e.must("media", "restore", "--library", lib, p.ID[:10], "--to", out)
		if !sameFile(t, out, imgs[p.VM]) {
			t.Fatalf("point of %s restores wrong from a copy through two drives", p.VM)
		}
	}
}
