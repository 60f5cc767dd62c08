package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HoldersOf lists the processes' open files and working directories under
// dir, as "pid (comm): path", so that a busy unmount names its cause.
func HoldersOf(dir string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var held []string
	for _, proc := range procs {
		held = append(held, openUnder(proc, dir)...)
	}
	return held
}

// OwnFilesUnder lists the files under dir that this process holds open.
// Code that leaves one open (a store never closed) holds it until the
// garbage collector finalises it: an fd leak in a long-running server,
// and a filesystem that cannot be unmounted meanwhile.
func OwnFilesUnder(dir string) []string { return openUnder(fmt.Sprintf("/proc/%d", os.Getpid()), dir) }

func openUnder(proc, dir string) []string {
	comm, _ := os.ReadFile(filepath.Join(proc, "comm"))
	links, _ := filepath.Glob(filepath.Join(proc, "fd", "*"))
	links = append(links, filepath.Join(proc, "cwd"))
	var held []string
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && (target == dir || strings.HasPrefix(target, dir+"/")) {
			held = append(held, fmt.Sprintf("%s (%s): %s", filepath.Base(proc), strings.TrimSpace(string(comm)), target))
		}
	}
	return held
}
