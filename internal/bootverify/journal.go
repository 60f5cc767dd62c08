package bootverify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// journal records a verification's run directory (overlays, sockets,
// console, QEMU's pid file) before anything is created in it, so that
// Cleanup can remove exactly that after coffer was killed. The NBD export
// is served by coffer itself: it dies with it, and its socket is in the
// run directory.
type journal struct {
	path string
	journalState
}

type journalState struct {
	CofferPID int       `json:"coffer_pid"`
	Point     string    `json:"point"`
	VM        string    `json:"vm"`
	Dir       string    `json:"dir"`
	Created   time.Time `json:"created"`
}

// Root is where verifications keep their run directories and journals
// under a state directory.
func Root(stateDir string) string { return filepath.Join(stateDir, "bootverify") }

func (j *journal) save() error { return statefile.WriteJSON(j.path, j.journalState) }

func (j *journal) pidFile() string { return filepath.Join(j.Dir, "qemu.pid") }

// Leftover is something Cleanup removed.
type Leftover struct {
	Point  string
	Kind   string // "qemu", "run-directory"
	Name   string
	Action string
}

// Cleanup removes what verifications of dead coffer processes left: their
// QEMU (killed), run directory (overlays, export socket, console) and
// journal. Verifications of live processes are theirs to finish.
func Cleanup(ctx context.Context, stateDir string) ([]Leftover, error) {
	files, err := statefile.ReadAll[journalState](Root(stateDir))
	if err != nil {
		return nil, err
	}
	var out []Leftover
	var errs []error
	for _, f := range files {
		j := &journal{path: f.Path, journalState: f.Value}
		if j.CofferPID == os.Getpid() || statefile.ProcessAlive(j.CofferPID) {
			continue
		}
		left, err := j.undo(ctx)
		out = append(out, left...)
		if err != nil {
			errs = append(errs, fmt.Errorf("boot verification of %s: %w", j.Point, err))
		}
	}
	return out, errors.Join(errs...)
}

// undo kills the run's QEMU and removes its directory, then the journal.
func (j *journal) undo(ctx context.Context) ([]Leftover, error) {
	var out []Leftover
	if pid := readPID(j.pidFile()); pid > 0 && ownsProcess(pid, j.Dir) {
		if err := killAndWait(ctx, pid); err != nil {
			return out, err
		}
		out = append(out, Leftover{Point: j.Point, Kind: "qemu", Name: strconv.Itoa(pid), Action: "killed"})
	}
	if _, err := os.Stat(j.Dir); err == nil {
		if err := os.RemoveAll(j.Dir); err != nil {
			return out, err
		}
		out = append(out, Leftover{Point: j.Point, Kind: "run-directory", Name: j.Dir, Action: "removed (overlays, export socket, console)"})
	}
	return out, statefile.Remove(j.path)
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// ownsProcess reports whether pid is the QEMU of run directory dir: its
// command line names files in dir. A pid reused by another process since
// is left alone.
func ownsProcess(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(b, []byte(dir+string(filepath.Separator)))
}

// killAndWait kills pid and waits until it is gone. QEMU daemonized is not
// coffer's child, so there is nothing to wait(2) for: /proc is watched.
func killAndWait(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill QEMU %d: %w", pid, err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !gone(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("QEMU %d did not exit: %w", pid, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// gone reports whether pid has exited (a zombie counts as gone: only its
// parent can reap it).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}
