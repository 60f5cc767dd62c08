package guestvm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/ovmf"
)

// KernelArgs start every test guest's kernel command line, whoever boots
// it (QEMU directly, libvirt, a boot disk's syslinux). no_timer_check:
// under TCG on a loaded host the kernel's IO-APIC timer check can miss its
// ticks and panic at boot ("IO-APIC + timer doesn't work"); the emulated
// timer works, so the check is skipped.
const KernelArgs = "console=ttyS0 quiet panic=-1 no_timer_check"

// Disk is one virtio disk of a guest.
type Disk struct {
	ID     string // device id ("vda"), also the node-name prefix
	Path   string
	Format string // "qcow2" or "raw"
	// Blockdev replaces the generated -blockdev options (instant recovery
	// boots from an NBD-backed overlay); its top node must be named ID.
	Blockdev []string
	// ShareRW lets others write the disk's node while the guest runs
	// (QEMU's share-rw): a benchmark rewrites part of it through the
	// monitor's qemu-io, which the device otherwise refuses.
	ShareRW bool
}

// Options configure a guest.
type Options struct {
	Name       string
	UUID       string
	Dir        string // sockets, console log, pid file
	Disks      []Disk
	Mode       string // workload mode: write, check, idle
	Base       int    // base dataset blocks (write mode)
	Interval   time.Duration
	GuestAgent bool
	MemoryMiB  int
	Extra      []string // more QEMU arguments
	// DiskBoot boots from the first disk's boot sector (a disk from
	// BuildBootDisk, whose bootloader passes the kernel command line)
	// instead of QEMU's -kernel.
	DiskBoot bool
	// EFI boots through UEFI firmware instead of the BIOS (with
	// DiskBoot: a disk from BuildEFIBootDisk).
	// Start copies the variable store's template into Dir: a guest
	// writes its own (the firmware records boot entries there).
	EFI *ovmf.Firmware
}

// efiVars is a guest's copy of its firmware's variable store.
func efiVars(o Options) string { return filepath.Join(o.Dir, "efivars.fd") }

// VM is a running guest started by Start.
type VM struct {
	Opts    Options
	QMPPath string // coffer's dedicated monitor
	TestQMP string // a second monitor for the test harness
	QGAPath string
	cmd     *exec.Cmd
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
	exited  chan struct{}
	exitErr error
}

// QEMUArgs is the launch line for opts (without the binary).
func QEMUArgs(img *Image, o Options) []string {
	mem := o.MemoryMiB
	if mem == 0 {
		mem = 256
	}
	appendArgs := fmt.Sprintf(KernelArgs+" coffer.mode=%s coffer.base=%d coffer.interval=%d",
		o.Mode, max(o.Base, 16), max(o.Interval.Milliseconds(), 10))
	if o.GuestAgent {
		appendArgs += " coffer.qga=1"
	}
	a := []string{"-accel", "tcg", "-m", fmt.Sprint(mem), "-smp", "1", "-nodefaults", "-display", "none", "-name", o.Name}
	if !o.DiskBoot {
		a = append(a, "-kernel", img.Kernel, "-initrd", img.Initrd, "-append", appendArgs)
	}
	switch {
	case o.EFI != nil && o.EFI.Vars == "":
		a = append(a, "-bios", o.EFI.Code)
	case o.EFI != nil:
		a = append(a, "-drive", "if=pflash,format=raw,readonly=on,file="+o.EFI.Code,
			"-drive", "if=pflash,format=raw,file="+efiVars(o))
	}
	a = append(a, "-serial", "stdio", "-no-reboot",
		// fds 3 and 4 are sockets Start listens on before QEMU runs, so
		// they accept connections the moment Start returns.
		"-chardev", "socket,id=coffer-mon,fd=3,server=on,wait=off",
		"-mon", "chardev=coffer-mon,mode=control",
		"-chardev", "socket,id=test-mon,fd=4,server=on,wait=off",
		"-mon", "chardev=test-mon,mode=control",
	)
	if o.UUID != "" {
		a = append(a, "-uuid", o.UUID)
	}
	for _, d := range o.Disks {
		if d.Blockdev != nil {
			for _, b := range d.Blockdev {
				a = append(a, "-blockdev", b)
			}
		} else {
			a = append(a, "-blockdev", fmt.Sprintf("driver=file,filename=%s,node-name=%s-file,cache.direct=off", d.Path, d.ID),
				"-blockdev", fmt.Sprintf("driver=%s,file=%s-file,node-name=%s", d.Format, d.ID, d.ID))
		}
		dev := fmt.Sprintf("virtio-blk-pci,drive=%s,id=%s", d.ID, d.ID)
		if d.ShareRW {
			dev += ",share-rw=on"
		}
		a = append(a, "-device", dev)
	}
	if o.GuestAgent {
		a = append(a, "-device", "virtio-serial-pci,id=vser0",
			"-chardev", "socket,id=qga0,fd=5,server=on,wait=off",
			"-device", "virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0")
	}
	return append(a, o.Extra...)
}

// Start boots a guest. It returns once QEMU's monitors accept connections;
// use WaitConsole for guest milestones. The VM is killed when ctx ends.
func Start(ctx context.Context, img *Image, o Options) (*VM, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if o.EFI != nil && o.EFI.Vars != "" {
		if err := copyFile(o.EFI.Vars, efiVars(o)); err != nil {
			return nil, fmt.Errorf("the guest's EFI variable store: %w", err)
		}
	}
	vm := &VM{Opts: o, QMPPath: filepath.Join(o.Dir, "qmp.sock"), TestQMP: filepath.Join(o.Dir, "test-qmp.sock"),
		QGAPath: filepath.Join(o.Dir, "qga.sock"), changed: make(chan struct{}), exited: make(chan struct{})}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", QEMUArgs(img, o)...)
	// A harness that exits without cancelling ctx (log.Fatal in a
	// benchmark, a killed test binary) must not leave a guest burning CPU.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	for _, p := range []string{vm.QMPPath, vm.TestQMP, vm.QGAPath} {
		f, err := listenFile(p)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }() // QEMU holds its own copy
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(o.Dir, "console.log"))
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		_ = logf.Close() // nothing written yet
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	vm.cmd = cmd
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stdout, logf))
		for sc.Scan() {
			vm.mu.Lock()
			vm.lines = append(vm.lines, sc.Text())
			close(vm.changed)
			vm.changed = make(chan struct{})
			vm.mu.Unlock()
		}
		err := cmd.Wait()
		_ = logf.Close() // a test's console log: nothing to report it to
		vm.mu.Lock()
		vm.exitErr = fmt.Errorf("qemu exited: %v: %s", err, stderr.String())
		vm.mu.Unlock()
		close(vm.exited)
	}()
	return vm, nil
}

// WaitConsole waits for a console line containing s and returns it.
func (vm *VM) WaitConsole(ctx context.Context, s string) (string, error) {
	_, l, err := vm.WaitConsoleFrom(ctx, 0, s)
	return l, err
}

// Mark is the number of console lines so far, for WaitConsoleFrom.
func (vm *VM) Mark() int {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return len(vm.lines)
}

// WaitConsoleFrom waits for a line containing s at or after line index
// from; it returns the index after the match and the line.
func (vm *VM) WaitConsoleFrom(ctx context.Context, from int, s string) (int, string, error) {
	seen := from
	for {
		vm.mu.Lock()
		for ; seen < len(vm.lines); seen++ {
			if strings.Contains(vm.lines[seen], "COFFER FAIL") {
				l := vm.lines[seen]
				vm.mu.Unlock()
				return seen + 1, l, fmt.Errorf("guest: %s", l)
			}
			if strings.Contains(vm.lines[seen], s) {
				l := vm.lines[seen]
				vm.mu.Unlock()
				return seen + 1, l, nil
			}
		}
		ch := vm.changed
		vm.mu.Unlock()
		select {
		case <-ch:
		case <-vm.exited:
			vm.mu.Lock()
			err := vm.exitErr
			vm.mu.Unlock()
			return seen, "", fmt.Errorf("waiting for %q: %w", s, err)
		case <-ctx.Done():
			return seen, "", fmt.Errorf("waiting for %q on the guest console: %w", s, ctx.Err())
		}
	}
}

// Console returns the console output so far.
func (vm *VM) Console() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return strings.Join(vm.lines, "\n")
}

// PID is QEMU's process id.
func (vm *VM) PID() int { return vm.cmd.Process.Pid }

// Exited is closed when QEMU is gone.
func (vm *VM) Exited() <-chan struct{} { return vm.exited }

// Kill stops QEMU at once (like a host crash) and waits for it.
func (vm *VM) Kill() {
	_ = vm.cmd.Process.Kill() // fails only if it has exited already
	<-vm.exited
}

// listenFile binds a unix socket at path and returns it as a file to hand
// to QEMU; the socket stays on disk after the parent's copy is closed.
func listenFile(path string) (*os.File, error) {
	_ = os.Remove(path) // a stale socket, if any: Listen reports what matters
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	defer func() { _ = ul.Close() }() // QEMU gets the socket through its file
	return ul.File()
}
