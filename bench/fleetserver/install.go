package fleetserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/bench/catalogfill"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// A filled catalog is kept in the work directory with a marker holding
// its shape: the next run with the same shape reuses it (filling the
// issue's shape takes minutes).
const marker = "filled.json"

// Install is an installation of coffer on a filled catalog: the built
// binary, the catalog, a small real repository, a configuration and a
// state directory, which every command of it and its server share.
type Install struct {
	Coffer  string            // the built binary
	DB      string            // sqlite or postgres
	Catalog string            // the catalog's location (a file or a DSN)
	Shape   catalogfill.Shape // what the catalog holds (End set)
	Env     []string          // COFFER_* variables of every command
	// StateDir is the server's state directory (TLS key and certificate,
	// the administrator's marker).
	StateDir string
	stop     func()
	// pidFile is PostgreSQL's postmaster.pid ("" on SQLite).
	pidFile string
}

// Build compiles coffer from the module this runs in into dir, and
// returns a copy of it out of the page cache, as bench/rss.sh and
// bench/budget.sh run theirs: the linker writes the binary through a
// mapping, which leaves it in the page cache in 2 MiB folios that the
// kernel (6.18 here) maps whole at the first touch, so a process of the
// fresh binary counts 65 MiB of it in RSS; a copy written as a package
// manager writes it, or the binary read back from disk, counts what the
// process touches (35 MiB), as an installed coffer does.
func Build(dir string) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	bin, built := filepath.Join(dir, "coffer"), filepath.Join(dir, "coffer.built")
	cmd := exec.Command("go", "build", "-o", built, "./cmd/coffer")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("go build ./cmd/coffer (run from the repository's root): %v", err)
	}
	if err := installCopy(built, bin); err != nil {
		log.Fatalf("copy the built coffer: %v", err)
	}
	return bin
}

// installCopy writes a copy of built at bin with write(2), removes built,
// and drops the copy's pages from the page cache.
func installCopy(built, bin string) error {
	data, err := os.ReadFile(built)
	if err != nil {
		return err
	}
	_ = os.Remove(bin) // (a running process of the old one keeps its inode)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		return err
	}
	f, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := f.Sync(); err != nil { // dirty pages are not dropped
		return err
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return err
	}
	return os.Remove(built)
}

// Prepare returns the installation of db (sqlite or postgres) in
// dir/db, on a catalog filled with s (filled now unless a previous run
// left it): PostgreSQL is started on its kept data directory (Close
// stops it). s.End is chosen by Prepare (see endOf).
func Prepare(ctx context.Context, dir, coffer, db string, s catalogfill.Shape) *Install {
	repo, password := prepareRepository(coffer, filepath.Join(dir, "repository"))
	s.End = endOf(filepath.Join(dir, db), s)
	in := &Install{Coffer: coffer, DB: db, Shape: s, StateDir: filepath.Join(dir, db, "state"), stop: func() {}}
	switch db {
	case "sqlite":
		in.Catalog = prepareSQLite(ctx, filepath.Join(dir, db), s)
	case "postgres":
		var data string
		in.Catalog, data, in.stop = preparePostgres(ctx, filepath.Join(dir, db), s)
		in.pidFile = filepath.Join(data, "data", "postmaster.pid")
	default:
		log.Fatalf("-db: unknown catalog %q (sqlite or postgres)", db)
	}
	in.Env = []string{"COFFER_REPO=" + repo, "COFFER_PASSWORD=" + password, "COFFER_CATALOG=" + in.Catalog,
		"COFFER_CONFIG=" + serverConfig(filepath.Join(dir, db), s), "COFFER_STATE_DIR=" + in.StateDir}
	return in
}

// Close stops what Prepare started (PostgreSQL).
func (in *Install) Close() { in.stop() }

// DatabasePID is the process ID of PostgreSQL's postmaster (its backends
// are its children), or 0 on SQLite, which runs in the server's process.
func (in *Install) DatabasePID() int {
	if in.pidFile == "" {
		return 0
	}
	b, err := os.ReadFile(in.pidFile)
	if err != nil {
		log.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		log.Fatalf("%s: no process ID on its first line: %v", in.pidFile, err)
	}
	return pid
}

// InitAdmin makes the server's administrator (coffer server init), once
// per catalog: a marker in the state directory says it was done.
func (in *Install) InitAdmin() {
	if _, err := os.Stat(filepath.Join(in.StateDir, "admin")); err == nil {
		return
	}
	in.Run("server", "init")
	if err := os.MkdirAll(in.StateDir, 0o700); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in.StateDir, "admin"), nil, 0o600); err != nil {
		log.Fatal(err)
	}
}

// Run runs a coffer command of the installation and returns its stdout;
// it stops the benchmark when coffer fails.
func (in *Install) Run(args ...string) string { return run(in.Coffer, in.Env, args...) }

// Start starts the installation's server (see Start).
func (in *Install) Start(args ...string) *Server { return Start(in.Coffer, in.Env, args...) }

// endOf is the end of the history of a kept catalog, or today's start for
// a new one. A catalog filled more than a week ago is filled again: its
// history must stay within the server's retention.
func endOf(dir string, s catalogfill.Shape) time.Time {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for back := range 7 {
		s.End = today.Add(-time.Duration(back) * 24 * time.Hour)
		if filled(dir, s) {
			return s.End
		}
	}
	return today
}

// prepareSQLite returns the location of a SQLite catalog filled with s.
func prepareSQLite(ctx context.Context, dir string, s catalogfill.Shape) string {
	loc := filepath.Join(dir, "catalog.db")
	if filled(dir, s) {
		return loc
	}
	_ = os.RemoveAll(dir)
	fill(ctx, "sqlite", loc, s)
	mark(dir, s)
	return loc
}

// preparePostgres starts PostgreSQL on a data directory kept in dir and
// returns the DSN of a database filled with s, the directory it was
// launched in, and stop.
func preparePostgres(ctx context.Context, dir string, s catalogfill.Shape) (string, string, func()) {
	bin, err := testutil.FindPostgresBinDir()
	if err != nil {
		log.Fatal(err)
	}
	// As root, PostgreSQL runs as the postgres user, which must reach its
	// data directory: under /tmp rather than in the work directory.
	data := filepath.Join(dir, "pg")
	if os.Geteuid() == 0 {
		data = filepath.Join(os.TempDir(), "coffer-bench-server-pg")
	}
	if !filled(dir, s) {
		_ = os.RemoveAll(dir)
		_ = os.RemoveAll(data)
	}
	dsn, stop, err := testutil.LaunchPostgres(bin, data)
	if err != nil {
		log.Fatal(err)
	}
	bench := strings.Replace(dsn, "/postgres?", "/coffer_bench?", 1)
	if filled(dir, s) {
		return bench, data, stop
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		stop()
		log.Fatal(err)
	}
	for _, q := range []string{"DROP DATABASE IF EXISTS coffer_bench", "CREATE DATABASE coffer_bench"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			stop()
			log.Fatal(err)
		}
	}
	_ = conn.Close(ctx)
	fill(ctx, "postgres", bench, s)
	mark(dir, s)
	return bench, data, stop
}

func fill(ctx context.Context, name, loc string, s catalogfill.Shape) {
	log.Printf("%s: filling the catalog: %d VMs, %d jobs (%d policy runs, %d per-VM tasks), %d points, %d audit records",
		name, s.VMs, s.Jobs, s.PolicyRuns, s.TaskRows(), s.Points(), s.Audit)
	start := time.Now()
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	err = catalogfill.Fill(ctx, cat, s, func(what string, rows int, took time.Duration) {
		rate := ""
		if rows > 0 {
			rate = fmt.Sprintf(" (%.0f rows/s)", float64(rows)/took.Seconds())
		}
		log.Printf("%s:   %d %s in %.1f s%s", name, rows, what, took.Seconds(), rate)
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%s: filled in %.0f s", name, time.Since(start).Seconds())
}

func shapeJSON(s catalogfill.Shape) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		log.Fatal(err)
	}
	return b
}

func filled(dir string, s catalogfill.Shape) bool {
	b, err := os.ReadFile(filepath.Join(dir, marker))
	return err == nil && string(b) == string(shapeJSON(s))
}

func mark(dir string, s catalogfill.Shape) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, marker), shapeJSON(s), 0o644); err != nil {
		log.Fatal(err)
	}
}

// prepareRepository makes the small real repository the server opens
// (readiness checks it, the points endpoint lists it): one backup of a
// small disk image, recorded in a catalog of its own so that the
// benchmark's catalogs hold only the fill.
func prepareRepository(coffer, dir string) (repo, password string) {
	repo, password = filepath.Join(dir, "repo"), "bench password"
	if _, err := os.Stat(filepath.Join(dir, "repo.done")); err == nil {
		return repo, password
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	img := filepath.Join(dir, "disk.img")
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7 / 4096)
	}
	if err := os.WriteFile(img, data, 0o644); err != nil {
		log.Fatal(err)
	}
	env := []string{"COFFER_REPO=" + repo, "COFFER_PASSWORD=" + password, "COFFER_CATALOG=" + filepath.Join(dir, "setup.db"),
		"COFFER_CONFIG=" + emptyConfig(dir), "COFFER_STATE_DIR=" + filepath.Join(dir, "state")}
	for _, args := range [][]string{{"init"}, {"backup", "disk", img}, {"backup", "disk", img}} {
		run(coffer, env, args...)
	}
	if err := os.WriteFile(filepath.Join(dir, "repo.done"), nil, 0o644); err != nil {
		log.Fatal(err)
	}
	return repo, password
}

func emptyConfig(dir string) string {
	p := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		log.Fatal(err)
	}
	return p
}

// serverConfig is the server's configuration file: the shape's
// connections, as QEMU connections whose socket patterns match nothing;
// an inventory refreshed once a year: the VM view reads the inventory
// the fill wrote (the hypervisors' listing is the refresher's work in
// the background, measured by bench/vsphere), which a refresh of these
// connections would empty; and the policy whose runs the history holds,
// selecting the VMs the fill says it selects (nine in ten: not those
// whose number ends in 0), without a schedule, so that no run starts
// during a benchmark (a run lists the connections, and would empty the
// inventory too).
func serverConfig(dir string, s catalogfill.Shape) string {
	if err := os.MkdirAll(filepath.Join(dir, "sockets"), 0o755); err != nil {
		log.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("connections:\n")
	for c := range s.Connections {
		fmt.Fprintf(&b, "  - name: %s\n    kind: qemu\n    options: {sockets: [%q]}\n", catalogfill.Connection(c),
			filepath.Join(dir, "sockets", catalogfill.Connection(c)+"-*.qmp"))
	}
	b.WriteString("maintenance:\n  inventory-every: 8760h\n")
	fmt.Fprintf(&b, "policies:\n  - name: %s\n    connections: [", catalogfill.Policy)
	for c := range s.Connections {
		if c > 0 {
			b.WriteString(", ")
		}
		b.WriteString(catalogfill.Connection(c))
	}
	b.WriteString("]\n    select: {names: [\"vm-*\"]}\n    exclude: {names: [\"vm-????0\"]}\n    retention: {keep-last: 10}\n")
	p := filepath.Join(dir, "coffer.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	return p
}

// run runs coffer and returns its stdout; it stops the benchmark when
// coffer fails.
func run(coffer string, env []string, args ...string) string {
	cmd := exec.Command(coffer, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("coffer %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}
