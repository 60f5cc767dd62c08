package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/bench/fleetserver"
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqldump"
)

// usage is what one coffer process took, from its exec to its exit.
type usage struct {
	wall time.Duration
	// peakRSS is the process's high-water mark (VmHWM), as last read
	// before its exit: not wait4's ru_maxrss, which holds the
	// benchmark's own peak (Go starts a child with CLONE_VM, and exec
	// records the memory it leaves, the parent's, in the child's
	// ru_maxrss: /bin/true started by a process of 300 MiB reports 302).
	peakRSS int64
	// peakAnon is the largest anonymous resident set seen (RssAnon, read
	// every few milliseconds): the process's own memory, apart from the
	// pages of its binary that the kernel maps (RssFile, clean and
	// shared with the page cache), which peakFile is, at that moment.
	peakAnon, peakFile int64
	cpu                time.Duration
}

// runMeasured runs coffer with --json, decodes its output into out, and
// reads the process's peak RSS from /proc while it runs and its CPU time
// from wait4's rusage; it stops the benchmark when coffer fails.
func runMeasured(coffer string, env []string, out any, args ...string) usage {
	cmd := exec.Command(coffer, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	sampled := make(chan [3]int64)
	stop := make(chan struct{})
	go sampleRSS(cmd.Process.Pid, stop, sampled)
	err := cmd.Wait()
	u := usage{wall: time.Since(start)}
	close(stop)
	peak := <-sampled
	u.peakAnon, u.peakFile, u.peakRSS = peak[0], peak[1], peak[2]
	if err != nil {
		log.Fatalf("coffer %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		log.Fatal("no rusage for the child (Linux only)")
	}
	u.cpu = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	if err := json.Unmarshal([]byte(stdout.String()), out); err != nil {
		log.Fatalf("coffer %s: its output is not the JSON expected: %v\n%s", strings.Join(args, " "), err, stdout.String())
	}
	return u
}

// sampleRSS reads the process's RssAnon, RssFile and VmHWM every 2 ms
// until stop is closed, then sends the largest RssAnon seen with the
// RssFile of that moment, and the last VmHWM. A sample is a measurement,
// not a synchronisation: VmHWM is the kernel's exact peak up to the last
// read, so only what the process adds in its last 2 ms can be missed.
func sampleRSS(pid int, stop <-chan struct{}, out chan<- [3]int64) {
	var peak [3]int64
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if anon, file, hwm, ok := readRSS(pid); ok {
			if anon > peak[0] {
				peak[0], peak[1] = anon, file
			}
			peak[2] = max(peak[2], hwm)
		}
		select {
		case <-stop:
			out <- peak
			return
		case <-tick.C:
		}
	}
}

func readRSS(pid int) (anon, file, hwm int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		var kb int64
		if _, err := fmt.Sscanf(strings.TrimSpace(val), "%d kB", &kb); err != nil {
			continue
		}
		switch key {
		case "RssAnon":
			anon, ok = kb<<10, true
		case "RssFile":
			file = kb << 10
		case "VmHWM":
			hwm = kb << 10
		}
	}
	return anon, file, hwm, ok
}

// host is a fresh host: an empty catalog of the installation's kind, its
// own state directory, the same repository and configuration.
type host struct {
	catalog string
	env     []string
	close   func()
}

func newHost(ctx context.Context, in *fleetserver.Install) host {
	dir := filepath.Join(filepath.Dir(in.StateDir), "fresh")
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Fatal(err)
	}
	h := host{catalog: filepath.Join(dir, "catalog.db"), close: func() {}}
	if in.DB == "postgres" {
		h.catalog = freshDatabase(ctx, in.Catalog)
	}
	for _, v := range in.Env {
		switch {
		case strings.HasPrefix(v, "COFFER_CATALOG="):
			v = "COFFER_CATALOG=" + h.catalog
		case strings.HasPrefix(v, "COFFER_STATE_DIR="):
			v = "COFFER_STATE_DIR=" + filepath.Join(dir, "state")
		}
		h.env = append(h.env, v)
	}
	return h
}

// freshDatabase makes an empty database beside the installation's (on
// the same PostgreSQL) and returns its DSN.
func freshDatabase(ctx context.Context, dsn string) string {
	admin := strings.Replace(dsn, "/coffer_bench?", "/postgres?", 1)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"DROP DATABASE IF EXISTS coffer_fresh", "CREATE DATABASE coffer_fresh"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			log.Fatal(err)
		}
	}
	return strings.Replace(dsn, "/coffer_bench?", "/coffer_fresh?", 1)
}

// compareTables compares each table of export in the source and the
// fresh catalog: the rows the export counted, in the dump's order (by
// the first column). Rows past them are those written after the export
// (the commands' own audit records), counted apart.
func compareTables(ctx context.Context, source, fresh string, export api.CatalogExport) string {
	var names []string
	rows := map[string]int64{}
	for _, t := range export.Tables {
		names = append(names, t.Name)
		rows[t.Name] = t.Rows
	}
	a, b := tableHashes(ctx, source, names, rows), tableHashes(ctx, fresh, names, rows)
	var diff []string
	extra := int64(0)
	for _, n := range names {
		if a[n].sum != b[n].sum || a[n].rows < rows[n] || b[n].rows < rows[n] {
			diff = append(diff, fmt.Sprintf("%s (%d rows exported, %d on the fresh host)", n, rows[n], b[n].rows))
		}
		extra += b[n].rows - rows[n]
	}
	if len(diff) > 0 {
		log.Fatalf("the fresh host's tables differ from the source's: %s", strings.Join(diff, ", "))
	}
	return fmt.Sprintf("%d tables identical to the source's (%d rows; %d rows written after the import)", len(names),
		export.Rows, extra)
}

type tableHash struct {
	rows int64  // rows in the table
	sum  string // SHA-256 of the first rows (as many as exported)
}

func tableHashes(ctx context.Context, loc string, tables []string, first map[string]int64) map[string]tableHash {
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	d, ok := sqldump.Of(cat)
	if !ok {
		log.Fatalf("%T cannot dump its tables", cat)
	}
	w := &hashWriter{first: first, out: map[string]tableHash{}}
	if _, err := d.Dump(ctx, tables, w); err != nil {
		log.Fatal(err)
	}
	w.end()
	return w.out
}

// hashWriter hashes each table's first rows as a dump gives them.
type hashWriter struct {
	first map[string]int64
	out   map[string]tableHash
	table string
	rows  int64
	h     hash.Hash
}

func (w *hashWriter) Table(name string, _ []string) error {
	w.end()
	w.table, w.rows, w.h = name, 0, sha256.New()
	return nil
}

func (w *hashWriter) Row(values []any) error {
	w.rows++
	if w.rows > w.first[w.table] {
		return nil
	}
	for _, v := range values {
		fmt.Fprintf(w.h, "%T:%v\x00", v, v)
	}
	_, _ = w.h.Write([]byte{'\n'})
	return nil
}

func (w *hashWriter) end() {
	if w.h != nil {
		w.out[w.table] = tableHash{rows: w.rows, sum: hex.EncodeToString(w.h.Sum(nil))}
	}
}
