package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// every Linux the benchmark runs on).
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU time (user and system) that process pid and, with
// tree, every process below it used so far: the server's own work, and
// the browser's (its renderer, GPU and network processes are its
// children). A process that ended is no longer counted, so a difference
// of two readings holds only for processes alive at both. Process 0 is
// none: 0.
func cpuTime(pid int, tree bool) time.Duration {
	if pid == 0 {
		return 0
	}
	stats := map[int][]string{} // pid → fields after the command's name
	children := map[int][]int{}
	if tree {
		dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, d := range dirs {
			p, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			if err != nil {
				continue
			}
			if f := statFields(d); f != nil {
				stats[p] = f
				ppid, _ := strconv.Atoi(f[1])
				children[ppid] = append(children[ppid], p)
			}
		}
	} else if f := statFields(filepath.Join("/proc", strconv.Itoa(pid), "stat")); f != nil {
		stats[pid] = f
	}
	var ticks int64
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[len(todo)-1]
		todo = append(todo[:len(todo)-1], children[p]...)
		if f := stats[p]; f != nil {
			ticks += parseTicks(f)
		}
	}
	return time.Duration(ticks) * clockTick
}

// statFields are the fields of a /proc/PID/stat after "PID (comm)": the
// command's name may hold spaces and parentheses, so they start after
// the last ')'. nil when the process is gone.
func statFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return nil
	}
	return f
}

// parseTicks is utime + stime (fields 14 and 15 of the whole line, 12
// and 13 after the name) in clock ticks.
func parseTicks(f []string) int64 {
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}
