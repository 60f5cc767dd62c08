package mediacmd_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// A library's drive-limit bounds the drives a copy writes with at once:
// a copy through its 3 drives under a limit of 2 writes every point, a
// session per drive, never more than 2 drives holding their slots at
// once (the copy counts them; at least one did: the drives went through
// the engine's limiter); its volumes verify. `policy
// check` reports the limit with the engine's others. Without a
// drive-limit every drive writes at once.
func TestMediaCopyDriveLimit(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	for _, name := range []string{"a", "b", "c"} {
		e.Must("backup", "disk", e.Image(name+".img", 2<<20, 1), "--name", name)
	}
	lib := filepath.Join(e.Dir, "vtl")
	e.Must("media", "vtl", "create", lib, "--drives", "3", "--slots", "6", "--capacity", "64MiB")
	for i := 1; i <= 6; i++ {
		e.Must("media", "vtl", "add", lib, "CFR00"+string(rune('0'+i))+"L8", "--slot", string(rune('0'+i)))
	}
	e.Config("media-libraries:\n  - {name: tapes, kind: vtl, directory: " + lib + ", drive-limit: 2}\n")
	if out := e.Must("policy", "check", "--offline"); !strings.Contains(out, "media library tapes: 2 drive(s) written at once (drive-limit)") {
		t.Fatalf("policy check does not report the drive-limit:\n%s", out)
	}

	res := clitest.Decode[api.MediaCopyResult](t, e.Must("media", "copy", "--library", "tapes", "--pool", "p", "--drives", "3", "--json"))
	if res.Drives != 3 || res.DriveLimit != 2 || res.DrivesAtOnce < 1 || res.DrivesAtOnce > 2 || len(res.Sessions) != 3 ||
		len(res.Copied) != 3 || len(res.Volumes) != 3 {
		t.Fatalf("copy through 3 drives, 2 at once: %+v", res)
	}
	for _, v := range res.Volumes {
		rep := clitest.Decode[api.MediaVerifyReport](t, e.Must("media", "verify", "--library", "tapes", v.Barcode, "--json"))
		if !rep.OK || !rep.CatalogueMatches {
			t.Fatalf("verify %s: %+v", v.Barcode, rep)
		}
	}
	if out := e.Must("media", "copy", "--library", "tapes", "--pool", "p", "--drives", "3", "--latest"); !strings.Contains(out,
		"through 3 drive(s) (2 at once: the library's drive-limit)") {
		t.Fatalf("the copy's line does not say the limit:\n%s", out)
	}

	e.Config("media-libraries:\n  - {name: tapes, kind: vtl, directory: " + lib + "}\n")
	res = clitest.Decode[api.MediaCopyResult](t, e.Must("media", "copy", "--library", "tapes", "--pool", "p", "--drives", "3", "--json"))
	if res.Drives != 3 || res.DriveLimit != 3 || res.DrivesAtOnce < 1 || len(res.Sessions) != 3 {
		t.Fatalf("copy through 3 drives without a drive-limit: %+v", res)
	}
}
