package qemu

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// IsolateSpec turns a relaunch (RelaunchArgs) into a throw-away test boot
// that cannot reach anything: boot verification runs a backup point's VM
// beside the production one, and its guest must neither talk to the
// network nor answer as the production VM.
type IsolateSpec struct {
	// Forward maps guest TCP ports to host ports on 127.0.0.1 (probes).
	// The guest gets a user-mode NIC with restrict=on: it can reach
	// nothing, the host reaches only these ports. Empty: no NIC at all.
	Forward map[int]int
	// NIC is the probes' network adapter model (default virtio-net-pci):
	// a VM from another hypervisor gets the adapter its guest has a
	// driver for.
	NIC string
	// Console is a unix socket coffer listens on: the first serial port
	// connects to it (and is logged to ConsoleLog as well).
	Console, ConsoleLog string
}

// Isolated is an isolated command line.
type Isolated struct {
	Args []string
	// AgentSocket is the guest agent channel's socket ("" when the VM has
	// none).
	AgentSocket string
}

// isolationDropped are options whose effect a test boot must not have: the
// VM's networks, and the reboot and panic policies the test sets itself
// (a reboot must be seen as a RESET, not end QEMU).
var isolationDropped = map[string]bool{"-netdev": true, "-nic": true, "-net": true, "-no-reboot": true,
	"-no-shutdown": true, "-action": true}

// displayDevices are -device drivers that give QEMU a screen to dump.
var displayDevices = []string{"vga", "qxl", "virtio-gpu", "cirrus", "bochs", "ramfb"}

// IsolateArgs rewrites a relaunch's arguments (RelaunchArgs, first
// element the binary) for spec. The VM starts paused (-S), so that no
// event escapes the caller, who connects to the monitor and continues it.
func IsolateArgs(args []string, spec IsolateSpec) Isolated {
	out := []string{args[0]}
	nodefaults, display, pvpanic, vgaNone, probeNIC := false, false, false, false, false
	agentDev := ""
	for i := 1; i < len(args); i++ {
		opt := args[i]
		val, hasVal := "", i+1 < len(args) && !strings.HasPrefix(opt, "--") && takesValue(opt)
		if hasVal {
			i++
			val = args[i]
		}
		if isolationDropped[opt] {
			continue
		}
		switch opt {
		case "-nodefaults":
			nodefaults = true
		case "-vga":
			vgaNone = val == "none"
			display = !vgaNone
		case "-serial":
			if strings.HasPrefix(val, "file:") && spec.Console != "" {
				val = "chardev:coffer-console"
			}
		case "-device":
			o := parseOpts(val)
			if o.has("netdev") {
				// The VM's NICs stay where they are: dropping one would
				// move the devices after it to other PCI slots, and the
				// guest's firmware (EFI boot entries) and its interface
				// names know them by slot. The first carries the probes'
				// restricted network, so the guest's own network
				// configuration brings it up; the others have no backend
				// (QEMU drops their packets).
				o.del("netdev")
				if len(spec.Forward) > 0 && !probeNIC {
					o.set("netdev", "coffer-probe")
					probeNIC = true
				}
				val = o.String()
			}
			drv := strings.ToLower(o.first())
			if drv == "" && len(o) > 0 {
				drv = strings.ToLower(o.get("driver"))
			}
			for _, d := range displayDevices {
				display = display || strings.Contains(drv, d)
			}
			pvpanic = pvpanic || strings.HasPrefix(drv, "pvpanic")
			if drv == "virtserialport" && o.get("name") == "org.qemu.guest_agent.0" {
				agentDev = o.get("chardev")
			}
		}
		out = append(out, opt)
		if hasVal {
			out = append(out, val)
		}
	}
	res := Isolated{}
	if agentDev != "" {
		// RelaunchArgs moved every socket chardev to DIR/ID.sock.
		for i := 1; i+1 < len(out); i++ {
			if out[i] == "-chardev" {
				o := parseOpts(out[i+1])
				if o.get("id") == agentDev && o.first() == "socket" {
					res.AgentSocket = o.get("path")
				}
			}
		}
	}
	if spec.Console != "" {
		// QEMU connects to coffer's socket as a client at start, so not a
		// byte of the console is lost before coffer reads it.
		out = append(out, "-chardev", fmt.Sprintf("socket,id=coffer-console,path=%s,logfile=%s",
			escapeOpt(spec.Console), escapeOpt(spec.ConsoleLog)))
	}
	if (nodefaults || vgaNone) && !display {
		// A screen to take the screenshot of, as the last PCI device: -vga
		// would take slot 2 and move the VM's own devices, whose PCI paths
		// the guest's firmware recorded (an EFI variable store's boot
		// entries name them: a moved disk is not booted).
		out = append(out, "-device", "VGA")
	}
	if !pvpanic {
		out = append(out, "-device", "pvpanic")
	}
	out = append(out, "-action", "panic=pause", "-S")
	if len(spec.Forward) == 0 {
		out = append(out, "-nic", "none")
	} else {
		out = append(out, "-netdev", "user,id=coffer-probe,restrict=on"+hypervisor.HostForwards(spec.Forward))
		if !probeNIC { // a VM without a NIC gets one for the probes
			nic := spec.NIC
			if nic == "" {
				nic = "virtio-net-pci"
			}
			out = append(out, "-device", nic+",netdev=coffer-probe")
		}
	}
	res.Args = out
	return res
}

func escapeOpt(s string) string { return strings.ReplaceAll(filepath.Clean(s), ",", ",,") }
