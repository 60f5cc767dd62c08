package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// peer runs restic or kopia against the same S3 server (through the same
// counting proxy), on the same images, with the same three steps. Both
// back up a file named disk.img in one directory, hard-linked first to
// the image and then to the modified copy, so each sees "the same file,
// changed".
type peer struct {
	name  string
	bin   string
	setup func(p *peer) error
	steps [3]func(p *peer) error
	env   []string
	dir   string
}

func findTool(name string) string {
	for _, p := range []string{filepath.Join(".cache", "bin", name), filepath.Join("bench", ".cache", "bin", name)} {
		if _, err := os.Stat(p); err == nil {
			abs, _ := filepath.Abs(p)
			return abs
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

func (p *peer) run(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Env = append(os.Environ(), p.env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (the step's deadline of %s ran out)", err, stepTimeout)
	}
	if err != nil {
		return out, fmt.Errorf("%s %s: %v: %s", p.name, strings.Join(args, " "), err, out)
	}
	return out, nil
}

// link points dir/disk.img at src.
func link(dir, src string) error {
	dst := filepath.Join(dir, "disk.img")
	os.Remove(dst)
	return os.Link(src, dst)
}

func resticPeer(bin, endpoint, bucket, work, image, modified string, s3env []string) *peer {
	src := filepath.Join(work, "restic-src")
	p := &peer{name: "restic " + toolVersion(bin, "version"), bin: bin, dir: src,
		env: append(s3env, "RESTIC_PASSWORD=benchmark", "RESTIC_REPOSITORY=s3:"+endpoint+"/"+bucket+"/restic",
			"RESTIC_CACHE_DIR="+filepath.Join(work, "restic-cache"))}
	p.setup = func(p *peer) error {
		os.MkdirAll(src, 0o755)
		_, err := p.run("init")
		return err
	}
	p.steps[0] = func(p *peer) error { return backupWith(p, image, "backup", "--quiet", src) }
	p.steps[1] = func(p *peer) error { return backupWith(p, modified, "backup", "--quiet", src) }
	p.steps[2] = func(p *peer) error {
		_, err := p.run("restore", "latest", "--sparse", "--target", filepath.Join(work, "restic-restored"))
		return err
	}
	return p
}

func kopiaPeer(bin, endpoint, bucket, work, image, modified string, s3env map[string]string) *peer {
	src := filepath.Join(work, "kopia-src")
	cfg := filepath.Join(work, "kopia.config")
	host := strings.TrimPrefix(endpoint, "http://")
	p := &peer{name: "kopia " + toolVersion(bin, "--version"), bin: bin, dir: src,
		env: []string{"KOPIA_PASSWORD=benchmark", "KOPIA_CONFIG_PATH=" + cfg, "KOPIA_CACHE_DIRECTORY=" + filepath.Join(work, "kopia-cache"),
			"KOPIA_CHECK_FOR_UPDATES=false"}}
	p.setup = func(p *peer) error {
		os.MkdirAll(src, 0o755)
		_, err := p.run("repository", "create", "s3", "--bucket", bucket, "--prefix", "kopia/", "--endpoint", host,
			"--disable-tls", "--access-key", s3env["AWS_ACCESS_KEY_ID"], "--secret-access-key", s3env["AWS_SECRET_ACCESS_KEY"],
			"--region", "us-east-1")
		return err
	}
	p.steps[0] = func(p *peer) error { return backupWith(p, image, "snapshot", "create", src) }
	p.steps[1] = func(p *peer) error { return backupWith(p, modified, "snapshot", "create", src) }
	p.steps[2] = func(p *peer) error {
		out, err := p.run("snapshot", "list", src, "--json")
		if err != nil {
			return err
		}
		var snaps []struct {
			RootEntry struct {
				Obj string `json:"obj"`
			} `json:"rootEntry"`
		}
		if err := json.Unmarshal(out, &snaps); err != nil || len(snaps) == 0 {
			return fmt.Errorf("kopia snapshot list: %v: %s", err, out)
		}
		_, err = p.run("restore", "--write-sparse-files", snaps[len(snaps)-1].RootEntry.Obj, filepath.Join(work, "kopia-restored"))
		return err
	}
	return p
}

func backupWith(p *peer, img string, args ...string) error {
	if err := link(p.dir, img); err != nil {
		return err
	}
	_, err := p.run(args...)
	return err
}

func toolVersion(bin string, arg string) string {
	out, _ := exec.Command(bin, arg).Output()
	f := strings.Fields(string(out))
	for _, w := range f {
		if strings.HasPrefix(w, "0.") || strings.HasPrefix(w, "v0.") {
			return strings.TrimPrefix(w, "v")
		}
	}
	return ""
}

// measure runs a peer's steps like coffer's, returning times and requests.
func measure(p *peer, count func() int64, readAll func(string) error, inputs [3]string) (out [3]time.Duration, reqs [3]int64) {
	if err := p.setup(p); err != nil {
		log.Fatal(err)
	}
	for i, step := range p.steps {
		if inputs[i] != "" {
			_ = readAll(inputs[i])
		}
		before := count()
		start := time.Now()
		if err := step(p); err != nil {
			log.Fatal(err)
		}
		syncAll()
		out[i], reqs[i] = time.Since(start), count()-before
	}
	return out, reqs
}
