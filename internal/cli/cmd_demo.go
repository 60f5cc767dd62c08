package cli

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/demo"
)

func (a *app) cmdDemo() *cobra.Command {
	var dir, listen string
	var keep, diskImage, serve bool
	cmd := command.FaceOnly(&cobra.Command{
		Use:   "demo",
		Short: "run coffer's main job end to end on embedded defaults",
		Long: command.Manual(`Boot a small real VM under QEMU (software emulation) whose guest keeps
writing self-verifying blocks to its disk, back it up live into a new
encrypted repository (full, then incremental from QEMU's dirty bitmaps),
verify every chunk, restore the latest point, check it block by block and
boot a second VM from it whose guest checks it again.

With --disk-image the demo backs up a generated disk image file instead
(no QEMU needed). Everything happens in --dir (default: a new temporary
directory, removed afterwards unless --keep), with the repository, the
catalog and an empty configuration of its own: the host's configuration
file and catalog play no part.

With --serve, once every check passed, the demo serves the REST API and
the web console over its own repository and catalog (its backup points
and jobs) on --listen, plain HTTP on a loopback address (default: a free
port on 127.0.0.1), prints a one-time link to choose the administrator's
password, and serves until Ctrl-C or SIGTERM. Without it the last lines
say how to open the console.`,
			`Each step ("==> ...") and the output of the commands it runs; then
how to open the console, or with --serve its address and setup link.`,
			`coffer demo
coffer demo --serve
coffer demo --serve --listen 127.0.0.1:8080
coffer demo --disk-image --dir /tmp/coffer-demo --keep`,
			"0 when every step passed (with --serve: and the server stopped); otherwise the status of the step that failed."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("listen") && !serve {
				return command.Usagef("--listen is where --serve serves: add --serve")
			}
			if serve {
				if err := checkDemoListen(listen); err != nil {
					return err
				}
			}
			kept := keep || dir != ""
			if dir == "" {
				d, err := os.MkdirTemp("", "coffer-demo-")
				if err != nil {
					return err
				}
				dir = d
				if !keep {
					defer func() { _ = os.RemoveAll(d) }()
				}
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			d := demoPlace{dir: dir}
			if err := d.prepare(!diskImage); err != nil {
				return err
			}
			then := func() error {
				if serve {
					return a.serveDemo(cmd.Context(), d, listen, kept)
				}
				a.consoleHint(d, kept)
				return nil
			}
			if diskImage {
				if err := a.runDemo(cmd, d); err != nil {
					return err
				}
				return then()
			}
			return a.runVMDemo(cmd.Context(), d, then)
		},
	}, "runs other commands end to end")
	cmd.Flags().StringVar(&dir, "dir", "", "working directory")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the working directory")
	cmd.Flags().BoolVar(&diskImage, "disk-image", false, "back up a generated disk image instead of a VM")
	cmd.Flags().BoolVar(&serve, "serve", false, "then serve the API and web console over the demo's results until Ctrl-C")
	cmd.Flags().StringVar(&listen, "listen", demoListen, "with --serve: the loopback address to serve plain HTTP on")
	return cmd
}

func (a *app) runDemo(cmd *cobra.Command, d demoPlace) error {
	ctx := cmd.Context()
	step := func(format string, args ...any) { fmt.Fprintf(a.Stdout, "==> "+format+"\n", args...) }
	dir := d.dir
	img := filepath.Join(dir, "machine.raw")
	step("building a 512 MiB machine disk with an ext4 filesystem in %s", img)
	if err := demo.MakeDiskImage(dir, img, 512); err != nil {
		return err
	}
	repoDir := d.path("repo")
	sub := func(args ...string) error { return d.run(ctx, a, args...) }
	step("creating an encrypted repository in %s", repoDir)
	if err := sub("init"); err != nil {
		return err
	}
	step("full backup")
	if err := sub("backup", "disk", img, "--name", "demo-vm"); err != nil {
		return err
	}
	var listing bytes.Buffer
	if code := Execute(ctx, append(d.args(), "snapshots", "--json"), a.Stdin, &listing, a.Stderr); code != 0 {
		return fmt.Errorf("listing snapshots failed with exit code %d", code)
	}
	var first []api.BackupPoint
	if err := json.Unmarshal(listing.Bytes(), &first); err != nil || len(first) != 1 {
		return fmt.Errorf("unexpected snapshot listing: %v", err)
	}
	sum1, err := fileSum(img)
	if err != nil {
		return err
	}
	step("changing 3 MiB of the disk and backing it up again")
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	change := make([]byte, 1<<20)
	for _, off := range []int64{300 << 20, 301 << 20, 450 << 20} {
		_, _ = rand.Read(change)
		if _, err := f.WriteAt(change, off); err != nil {
			_ = f.Close() // the write's error is returned
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := sub("backup", "disk", img, "--name", "demo-vm"); err != nil {
		return err
	}
	sum2, err := fileSum(img)
	if err != nil {
		return err
	}
	if err := sub("snapshots"); err != nil {
		return err
	}
	step("verifying every chunk")
	if err := sub("verify", "--read-data"); err != nil {
		return err
	}
	for i, want := range []string{sum1, sum2} {
		out := filepath.Join(dir, fmt.Sprintf("restored-%d.raw", i+1))
		ref := "latest"
		if i == 0 {
			ref = first[0].ID
		}
		step("restoring backup point %d to %s", i+1, out)
		if err := sub("restore", ref, "--to", out); err != nil {
			return err
		}
		got, err := fileSum(out)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("restored point %d differs from the disk at backup time", i+1)
		}
		step("point %d restored byte-identical (sha256 %s)", i+1, got[:16])
	}
	if err := sub("stats"); err != nil {
		return err
	}
	step("demo finished: both backup points restored and checked")
	return nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
