package repocmd_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/server"
)

// checkBootReadBack: the result verify boot printed (ran) and wrote the
// screenshot of (shot) is read back from the repository, without
// booting, by `verify boot show` and `verify boot list`, here and through
// a server (the same documents), and by the API's image of the screen.
// Then the remote command line boots the point again, through the server
// (with bootFlags, verify boot's flags), and reads the new result back.
func checkBootReadBack(t *testing.T, e *clitest.Env, ran api.BootVerification, shot string, bootFlags ...string) {
	t.Helper()
	var shown api.BootVerification
	if err := json.Unmarshal([]byte(e.Must("verify", "boot", "show", ran.VM, "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	ran.ScreenshotFile = ""
	if !reflect.DeepEqual(shown, ran) {
		t.Fatalf("verify boot show:\n%+v\nverify boot printed:\n%+v", shown, ran)
	}
	again := filepath.Join(e.Dir, "again.png")
	text := e.Must("verify", "boot", "show", ran.PointID[:8], "--screenshot", again)
	want, _ := os.ReadFile(shot)
	if got, err := os.ReadFile(again); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("verify boot show --screenshot wrote another image than verify boot (%v)", err)
	}
	for _, s := range []string{"boots: every step passed", "5 probes", "console tail:", "screenshot: " + again} {
		if !strings.Contains(text, s) {
			t.Errorf("verify boot show prints no %q:\n%s", s, text)
		}
	}
	var list []api.BootVerificationEntry
	if err := json.Unmarshal([]byte(e.Must("verify", "boot", "list", "--json")), &list); err != nil || len(list) != 1 ||
		list[0].PointID != ran.PointID || !list[0].Passed || !list[0].Screenshot {
		t.Fatalf("verify boot list: %+v %v", list, err)
	}
	if out := e.Must("verify", "boot", "list", "--vm", "nobody"); strings.Contains(out, ran.PointID[:8]) {
		t.Errorf("verify boot list --vm nobody lists web-1's:\n%s", out)
	}

	s := e.StartServer()
	defer func() { _ = s.Stop() }()
	tok := e.AdminToken()
	code, out, errOut := e.Remote(s, tok, "verify", "boot", "show", ran.VM, "--json")
	var remote api.BootVerification
	if err := json.Unmarshal([]byte(out), &remote); code != 0 || err != nil || !reflect.DeepEqual(remote, ran) {
		t.Fatalf("remote verify boot show: exit %d %v\n%s", code, err, errOut)
	}
	if code, out, errOut := e.Remote(s, tok, "verify", "boot", "list"); code != 0 || !strings.Contains(out, ran.PointID[:8]) || !strings.Contains(out, " ok") {
		t.Fatalf("remote verify boot list: exit %d\n%s%s", code, out, errOut)
	}
	req, err := http.NewRequest(http.MethodGet, s.URL+server.Prefix+"/repositories/default/points/"+ran.PointID+"/boot-verification/screenshot", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	png, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/png" || !bytes.Equal(png, want) {
		t.Fatalf("GET the screenshot: %d %s, %d bytes", res.StatusCode, res.Header.Get("Content-Type"), len(png))
	}

	code, out, errOut = e.Remote(s, tok, append([]string{"verify", "boot", ran.VM, "--json"}, bootFlags...)...)
	var rerun api.BootVerification
	if err := json.Unmarshal([]byte(out), &rerun); code != 0 || err != nil || !rerun.Passed || rerun.PointID != ran.PointID {
		t.Fatalf("remote verify boot: exit %d %v\n%s%s", code, err, out, errOut)
	}
	code, out, errOut = e.Remote(s, tok, "verify", "boot", "show", ran.VM, "--json")
	if err := json.Unmarshal([]byte(out), &remote); code != 0 || err != nil || !remote.Started.Equal(rerun.Started) || !remote.Started.After(ran.Started) {
		t.Fatalf("remote verify boot show after a remote verify boot: exit %d %v started %v, want %v\n%s", code, err, remote.Started, rerun.Started, errOut)
	}
}

// checkBootFailedAndUnverified: after a verification that failed at step
// 3, the listing says so and `verify boot show` prints the failed ladder;
// a point never verified, and a VM that does not exist, are not found.
func checkBootFailedAndUnverified(t *testing.T, e *clitest.Env) {
	t.Helper()
	if out := e.Must("verify", "boot", "list"); !strings.Contains(out, "failed@3 console-marker") {
		t.Errorf("verify boot list after a failed verification:\n%s", out)
	}
	if out := e.Must("verify", "boot", "show", "web-1"); !strings.Contains(out, "DOES NOT BOOT: step 3 failed") ||
		!strings.Contains(out, "3 console-marker  failed") {
		t.Errorf("verify boot show after a failed verification:\n%s", out)
	}
	disk := filepath.Join(e.Dir, "files.raw")
	if err := os.WriteFile(disk, bytes.Repeat([]byte("coffer"), 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Must("backup", "disk", disk, "--name", "files")
	if code, _, stderr := e.Run("verify", "boot", "show", "files"); code != command.ExitNoRepo || !strings.Contains(stderr, "no boot verification is stored") {
		t.Errorf("verify boot show of a point never verified: exit %d\n%s", code, stderr)
	}
	if code, _, _ := e.Run("verify", "boot", "show", "no-such-vm"); code != command.ExitNoRepo {
		t.Errorf("verify boot show of an unknown VM: exit %d", code)
	}

}
