package bootverify

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/ovmf"
)

// qemuBinary starts the VMs of points whose recorded configuration is not
// a QEMU command line (vSphere points).
const qemuBinary = "qemu-system-x86_64"

// hostQEMU is what this host offers a VM that QEMU did not run before:
// the devices its QEMU emulates, its EFI firmware, its CPUs and memory.
type hostQEMU struct {
	devices  map[string]bool // -device drivers, aliases included
	efi      efiFirmware     // zero when OVMF is not installed
	cpus     int
	memoryMB int64 // total RAM, 0 when unknown
}

// efiFirmware is OVMF (see ovmf.Firmware).
type efiFirmware struct {
	code, vars string
}

// deviceLine is one driver of `qemu-system-x86_64 -device help`:
// name "pvscsi", bus PCI ... or name "ich9-ahci", bus PCI, alias "ahci".
var deviceLine = regexp.MustCompile(`^name "([^"]+)"(?:.*alias "([^"]+)")?`)

// probeHost asks this host's QEMU which devices it emulates and finds
// its EFI firmware.
func probeHost(ctx context.Context) (hostQEMU, error) {
	h := hostQEMU{devices: map[string]bool{}, cpus: runtime.NumCPU(), memoryMB: totalMemoryMB()}
	out, err := exec.CommandContext(ctx, qemuBinary, "-device", "help").Output()
	if err != nil {
		return h, fmt.Errorf("cannot list the devices of %s (is QEMU installed?): %w", qemuBinary, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := deviceLine.FindStringSubmatch(sc.Text()); m != nil {
			h.devices[m[1]] = true
			if m[2] != "" {
				h.devices[m[2]] = true
			}
		}
	}
	if fw, ok := ovmf.Find(); ok {
		h.efi = efiFirmware{code: fw.Code, vars: fw.Vars}
	}
	return h, nil
}

// totalMemoryMB reads MemTotal from /proc/meminfo (0 when unknown).
func totalMemoryMB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb / 1024
		}
	}
	return 0
}

// copyFile copies the EFI variable store template: each VM writes its own.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}

// efiVarsPath is a run's copy of the EFI variable store.
func efiVarsPath(dir string) string { return filepath.Join(dir, "efivars.fd") }
