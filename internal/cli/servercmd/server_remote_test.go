package servercmd_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// ext4Image makes a disk image with an ext4 file system holding
// /etc/motd (content motd) and returns its path.
func ext4Image(e *clitest.Env, motd string) string {
	e.T.Helper()
	mkfs := testutil.RequireBinary(e.T, "mkfs.ext4")
	root := filepath.Join(e.Dir, "fsroot")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		e.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "motd"), []byte(motd), 0o644); err != nil {
		e.T.Fatal(err)
	}
	img := filepath.Join(e.Dir, "disk.raw")
	if out, err := exec.Command(mkfs, "-q", "-F", "-d", root, img, "16M").CombinedOutput(); err != nil {
		e.T.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	return img
}

// TestRemoteCommandLine: an operator's machine without the repository's
// password runs the everyday commands through the server with an API
// token: they answer as they do locally (the same documents), restores
// land in the server's restore directory, a download lands here, the
// jobs they started are the token's user's, a VM of a connection of the
// server is backed up through it, and a command that needs this host's
// files says it is local-only.
func TestRemoteCommandLine(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	const motd = "hello from the remote command line\n"
	img := ext4Image(e, motd)
	e.Must("backup", "disk", img, "--name", "web")
	s := e.StartServer()
	tok := e.AdminToken()
	remote := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := e.Remote(s, tok, args...)
		if code != want {
			t.Fatalf("remote coffer %v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	var local, remoteDoc []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("snapshots", "--json")), &local); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(remote(0, "snapshots", "--json")), &remoteDoc); err != nil || len(remoteDoc) != 1 ||
		remoteDoc[0].ID != local[0].ID || remoteDoc[0].LogicalBytes != local[0].LogicalBytes {
		t.Fatalf("remote snapshots %+v, local %+v (%v)", remoteDoc, local, err)
	}
	if out := remote(0, "verify"); !strings.Contains(out, "no problems found") {
		t.Fatalf("remote verify: %s", out)
	}
	if out := remote(0, "files", "ls", "latest", "/etc"); !strings.Contains(out, "motd") {
		t.Fatalf("remote files ls: %s", out)
	}
	zipPath := filepath.Join(e.Dir, "etc.zip")
	remote(0, "files", "get", "latest", "/etc", "--zip", zipPath)
	if got := zipFile(t, zipPath, "etc/motd"); got != motd {
		t.Fatalf("the downloaded zip holds %q", got)
	}
	remote(0, "restore", "latest", "--to", "web.raw")
	restored, err := os.ReadFile(filepath.Join(e.Vars["COFFER_STATE_DIR"], "restores", "web.raw"))
	if want, _ := os.ReadFile(img); err != nil || !bytes.Equal(restored, want) {
		t.Fatalf("the restore on the server differs from the image (%v)", err)
	}
	remote(command.ExitUsage, "restore", "latest", "--to", "../escape.raw")
	remote(0, "protect", "latest")
	if out := remote(0, "forget", "--keep-last", "1", "--dry-run"); !strings.Contains(out, "keep") {
		t.Fatalf("remote forget: %s", out)
	}
	remote(0, "gc", "--dry-run")
	remote(0, "stats")
	remote(0, "key", "list")
	// Repairs and keys through the server (issue 37): the server opens
	// the repository with its own password.
	if out := remote(0, "repair", "index", "--dry-run"); !strings.Contains(out, "dry run, nothing changed") {
		t.Fatalf("remote repair: %s", out)
	}
	pwFile := filepath.Join(e.Dir, "second.pw")
	if err := os.WriteFile(pwFile, []byte("a second password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var key api.Key
	if err := json.Unmarshal([]byte(remote(0, "key", "add", "--label", "remote", "--new-password-file", pwFile, "--json")), &key); err != nil ||
		key.Label != "remote" || key.Current {
		t.Fatalf("remote key add: %+v %v", key, err)
	}
	// The key the server runs with is refused, through the API and the
	// command line, though another key is left; it still opens the
	// repository for the server. The other key is removed.
	var keys []api.Key
	if err := json.Unmarshal([]byte(remote(0, "key", "list", "--json")), &keys); err != nil || len(keys) != 2 {
		t.Fatalf("remote key list: %+v %v", keys, err)
	}
	serverKey := keys[0].ID
	if keys[0].ID == key.ID || !keys[0].Current || keys[1].Current {
		t.Fatalf("remote key list: %+v, want the server's key first and in use", keys)
	}
	var problem struct{ Class, Detail string }
	if status, _ := s.Call(tok, http.MethodDelete, "/repositories/default/keys/"+serverKey, nil, &problem); status != http.StatusConflict ||
		problem.Class != string(api.Conflict) || !strings.Contains(problem.Detail, "currently used to access the repository") {
		t.Fatalf("DELETE of the server's key: %d %+v", status, problem)
	}
	if out := remote(command.ExitUsage, "key", "remove", serverKey[:8]); !strings.Contains(out, "coffer key add") {
		t.Fatalf("remote key remove of the server's key: %s", out)
	}
	remote(0, "snapshots")
	if out := remote(0, "key", "remove", key.ID); !strings.Contains(out, "removed key "+key.ID[:8]) {
		t.Fatalf("remote key remove: %s", out)
	}
	var jobs []api.Job
	if err := json.Unmarshal([]byte(remote(0, "jobs", "--json", "--user", "admin")), &jobs); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	restoreJob := ""
	for _, j := range jobs {
		kinds[j.Kind] = j.User == "admin" && j.Status == "success"
		if j.Kind == "restore" {
			restoreJob = strconv.FormatInt(j.ID, 10)
		}
	}
	if !kinds["verify"] || !kinds["restore"] || !kinds["gc"] {
		t.Fatalf("the remote operations are not the admin's finished jobs: %+v", jobs)
	}
	if out := remote(0, "job", "log", restoreJob); !strings.Contains(out, "restore latest") {
		t.Fatalf("the restore's log: %q", out)
	}
	out := remote(command.ExitUsage, "backup", "disk", img)
	// The refusal names what does work through a server, from the
	// commands' own annotations.
	_, offered, _ := strings.Cut(out, "Through a server:")
	if !strings.Contains(out, "works on this host only") || !strings.Contains(offered, "key add/list/remove") ||
		!strings.Contains(offered, "verify boot") || strings.Contains(offered, "backup disk") {
		t.Fatalf("backup disk through a server: %s", out)
	}
	if out := remote(0, "audit", "--operation", "restore-disk"); !strings.Contains(out, "/repositories/default") {
		t.Fatalf("the restore is not in the audit log: %s", out)
	}
	// Configuration objects through the server: created, read back with
	// the version, a change on a stale version refused (exit 2), then made
	// on the current one, listed with every kind, deleted; the local
	// command line sees the server's catalog change.
	spec := filepath.Join(e.Dir, "spare.yaml")
	if err := os.WriteFile(spec, []byte("name: spare\nlocation: "+filepath.Join(e.Dir, "spare")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote(0, "config", "create", "repository", "-f", spec)
	// A copy through the server names its repositories; --no-offload is
	// this host's switch.
	e.Must("init", "--repo", filepath.Join(e.Dir, "spare"))
	if out := remote(0, "copy", "--to", "spare", "latest"); !strings.Contains(out, "copied 1 backup point(s)") {
		t.Fatalf("remote copy: %s", out)
	}
	remote(command.ExitUsage, "copy", "--to", "spare", "--no-offload")
	var obj api.ConfigObject
	if err := json.Unmarshal([]byte(remote(0, "config", "get", "repository", "spare", "--json")), &obj); err != nil ||
		obj.Source != "catalog" || obj.CreatedBy != "admin" {
		t.Fatalf("remote config get: %+v %v", obj, err)
	}
	stale := strconv.FormatInt(obj.Version+1, 10)
	if out := remote(command.ExitUsage, "config", "update", "repository", "spare", "-f", spec, "--if-version", stale); !strings.Contains(out, "changed since version") {
		t.Fatalf("a stale remote update: %s", out)
	}
	remote(0, "config", "update", "repository", "spare", "-f", spec, "--if-version", strconv.FormatInt(obj.Version, 10))
	if out := remote(0, "config", "list"); !strings.Contains(out, "spare") {
		t.Fatalf("remote config list: %s", out)
	}
	if out := remote(0, "config", "show"); !strings.Contains(out, "spare") {
		t.Fatalf("remote config show: %s", out)
	}
	if out := e.Must("config", "get", "repository", "spare"); !strings.Contains(out, "changed by admin") {
		t.Fatalf("the server's change seen locally: %s", out)
	}
	remote(0, "config", "delete", "repository", "spare")
	remote(command.ExitNoRepo, "config", "get", "repository", "spare")

	// A VM of a connection the server reaches is backed up through it; a
	// QMP socket is a file of this host, which the server cannot reach.
	sim := filepath.Join(e.Dir, "sim.yaml")
	if err := os.WriteFile(sim, []byte("{name: sim, kind: fake, options: {vms: 2, disk-size: 128KiB}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote(0, "config", "create", "connection", "-f", sim)
	var vmPoint api.BackupPoint
	if err := json.Unmarshal([]byte(remote(0, "backup", "vm", "--connection", "sim", "db-0001", "--json")), &vmPoint); err != nil ||
		vmPoint.VM != "db-0001" || vmPoint.Connection != "sim" || vmPoint.Mode != "full" {
		t.Fatalf("remote backup vm: %+v %v", vmPoint, err)
	}
	if out := remote(command.ExitUsage, "backup", "vm", filepath.Join(e.Dir, "vm.qmp")); !strings.Contains(out, "server cannot reach") {
		t.Fatalf("a QMP socket through a server: %s", out)
	}

	// A token without the privilege gets exit 3 and the reason.
	weak := strings.TrimSpace(e.Must("token", "create", "--user", "admin", "--grant", "/repositories=Auditor"))
	if code, _, errOut := e.Remote(s, weak, "files", "ls", "latest"); code != command.ExitAccess || !strings.Contains(errOut, "Repo.Read") {
		t.Fatalf("the Auditor token browsing files: %d %s", code, errOut)
	}
}

func zipFile(t *testing.T, path, name string) string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name == name {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			b, _ := io.ReadAll(rc)
			return string(b)
		}
	}
	t.Fatalf("%s is not in %s", name, path)
	return ""
}
