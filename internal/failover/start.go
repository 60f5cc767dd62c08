package failover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/replica"
)

// machine is a VM failover started: its QEMU process and how to reach it.
type machine struct {
	dir       string
	pid       int
	qmpPath   string
	agentSock string
	// forward maps guest ports to host ports on 127.0.0.1 (a test's
	// isolated network); nil when the VM is on its own network.
	forward map[int]int
	// copy is a test failover's copy of a standby domain, which its
	// hypervisor runs (pid 0): stop ends it and removes its overlays.
	copy *domainCopy
	// ready is a remote standby's (or its test copy's) readiness as its
	// hypervisor reports it; discard ends a test copy of one; isolated
	// says coffer cannot reach that copy to probe it.
	ready    func(context.Context) (string, error)
	discard  func(context.Context) error
	isolated bool
}

// launch is how one VM starts.
type launch struct {
	def  *replica.Definition
	dir  string            // sockets, pid file, console log
	disk map[string]string // disk key -> the writable overlay it runs on
	// isolated starts the VM with no network but a user-mode NIC with
	// restrict=on that forwards the probes' ports (a test failover).
	isolated bool
	probes   []int // guest TCP ports the probes reach
	// cloudInit is a NoCloud directory attached as a read-only CIDATA disk.
	cloudInit string
}

// createOverlay makes a writable qcow2 overlay at file above a point's
// overlay (by absolute path: the run's directory is elsewhere).
func createOverlay(ctx context.Context, file, backing string) error {
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-b", backing, "-F", "qcow2", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create %s: %v: %s", file, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// start launches the VM of l and lets it run.
func start(ctx context.Context, l launch) (*machine, error) {
	if l.def.Config.Kind != "qemu" {
		return nil, fmt.Errorf("the standby of %s is of a %q VM: coffer starts QEMU standbys itself, others through their replication's connection (of kind libvirt)",
			l.def.Config.Name, l.def.Config.Kind)
	}
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return nil, err
	}
	spec := qemu.LaunchSpec{Dir: l.dir, Name: l.def.Config.Name, UUID: l.def.Config.UUID, Disks: map[string]qemu.LaunchDisk{}}
	for k, f := range l.disk {
		spec.Disks[k] = qemu.LaunchDisk{Path: f, Format: "qcow2"}
	}
	rl, err := qemu.RelaunchArgs(l.def.Config.Native, spec)
	if err != nil {
		return nil, err
	}
	var extra []string
	if l.cloudInit != "" {
		img := filepath.Join(l.dir, "cidata.img")
		if err := cidataImage(ctx, l.cloudInit, img); err != nil {
			return nil, err
		}
		extra = []string{"-drive", "file=" + img + ",format=raw,if=virtio,readonly=on,media=disk"}
	}
	m := &machine{dir: l.dir, qmpPath: spec.QMPPath()}
	if l.isolated {
		m.forward, err = qemu.LaunchForwarded(l.probes, qemu.FreePort, func(forward map[int]int) error {
			iso := qemu.IsolateArgs(rl.Args, qemu.IsolateSpec{Forward: forward})
			m.agentSock = iso.AgentSocket
			pid, err := qemu.Launch(ctx, append(iso.Args, extra...), spec)
			m.pid = pid
			return err
		})
	} else {
		m.agentSock = agentSocket(rl.Args)
		m.pid, err = qemu.Launch(ctx, append(rl.Args, extra...), spec)
	}
	if err != nil {
		return nil, err
	}
	if l.isolated { // IsolateArgs starts it paused (-S)
		cl, err := qmp.Dial(ctx, m.qmpPath)
		if err != nil {
			return m, err
		}
		defer func() { _ = cl.Close() }() // one command
		if err := cl.Execute(ctx, "cont", nil, nil); err != nil {
			return m, err
		}
	}
	return m, nil
}

// agentSocket finds the guest agent channel's socket in a relaunch's
// arguments (RelaunchArgs moves socket chardevs to DIR/ID.sock).
func agentSocket(args []string) string {
	dev := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-device" && strings.Contains(args[i+1], "name=org.qemu.guest_agent.0") {
			for _, kv := range strings.Split(args[i+1], ",") {
				if v, ok := strings.CutPrefix(kv, "chardev="); ok {
					dev = v
				}
			}
		}
	}
	for i := 0; dev != "" && i+1 < len(args); i++ {
		if args[i] == "-chardev" && strings.Contains(","+args[i+1]+",", ",id="+dev+",") {
			for _, kv := range strings.Split(args[i+1], ",") {
				if v, ok := strings.CutPrefix(kv, "path="); ok {
					return v
				}
			}
		}
	}
	return ""
}

// cidataImage writes a NoCloud seed (a vfat file system labelled CIDATA
// holding dir's user-data, meta-data and network-config) at img.
func cidataImage(ctx context.Context, dir, img string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cloud-init data: %w", err)
	}
	f, err := os.Create(img)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Truncate(2<<20), f.Close()); err != nil {
		return err
	}
	run := func(name string, args ...string) error {
		if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := run("mkfs.vfat", "-n", "CIDATA", img); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := run("mcopy", "-i", img, filepath.Join(dir, e.Name()), "::"+e.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}

// stop ends the VM: quit through its monitor, then SIGKILL after grace,
// and waits until the process is gone (its image locks released).
func (m *machine) stop(ctx context.Context, grace time.Duration) error {
	if m != nil && m.copy != nil {
		return m.copy.discard(ctx)
	}
	if m != nil && m.discard != nil {
		return m.discard(ctx)
	}
	if m == nil || m.pid == 0 {
		return nil
	}
	if alive(m.pid, m.dir) {
		qctx, cancel := context.WithTimeout(ctx, grace)
		if cl, err := qmp.Dial(qctx, m.qmpPath); err == nil {
			_ = cl.Execute(qctx, "quit", nil, nil) // the process ending closes the monitor
			_ = cl.Close()
		}
		cancel()
	}
	deadline := time.Now().Add(grace)
	for alive(m.pid, m.dir) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(m.pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // a process's exit has no event to wait on here
		}
	}
	return nil
}

// alive says whether pid is still a QEMU of run directory dir (not a
// recycled pid).
func alive(pid int, dir string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err == nil {
		if f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return false
		}
	}
	return strings.Contains(string(b), dir+string(filepath.Separator))
}

// readPID reads QEMU's pid file in dir (0 when there is none).
func readPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "qemu.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
