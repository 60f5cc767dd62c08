// Package benchutil holds what the benchmark programs share to run
// commands and to clean up: a benchmark mounts filesystems, attaches loop
// devices and starts guests, and must undo all of it on every exit,
// fatal ones included (log.Fatal skips deferred calls). It also reads the
// machine's load average, which every published figure is set beside.
package benchutil

import (
	"log"
	"os"
	"os/exec"
	"strings"
)

var cleanups []func()

// AtExit registers f to run at Exit, the last registered first.
func AtExit(f func()) { cleanups = append(cleanups, f) }

// Exit runs the cleanups and exits with code.
func Exit(code int) {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	os.Exit(code)
}

// Fatalf logs the message and exits with 1, cleaning up.
func Fatalf(format string, a ...any) {
	log.Printf(format, a...)
	Exit(1)
}

// Check exits with err, if any.
func Check(err error) {
	if err != nil {
		Fatalf("%v", err)
	}
}

// Run runs a command, exiting with its output if it fails.
func Run(name string, args ...string) {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		Fatalf("%s %v: %v %s", name, args, err, out)
	}
}

// Output runs a command and returns its standard output, exiting if it
// fails.
func Output(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// LoadAverage is the machine's 1-minute load average (other tenants'
// work included), for the record: "unknown" where /proc has none.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// Number is a catalog event's recorded number: float64 as read back from
// JSON, an integer as the in-memory catalog keeps it; 0 when absent.
func Number(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	return 0
}
