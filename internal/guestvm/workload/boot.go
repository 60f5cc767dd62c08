package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
)

// boot runs coffer.mode=boot: by default it brings the network up (when
// the VM has a NIC), serves HTTP on guestvm.BootProbePort, then prints a login
// prompt and idles.
func boot(disk, root string) {
	if root != "" {
		mountRoot(root)
	}
	b := make([]byte, 1)
	if f, err := os.Open(disk); err == nil {
		_, _ = f.Read(b) // unreadable: a normal boot
		_ = f.Close()
	}
	switch b[0] {
	case guestvm.BootPanic:
		fmt.Println("COFFER BOOT panicking")
		os.Exit(1)
	case guestvm.BootHang:
		for { // select{} with no other goroutine is a fatal deadlock: PID 1 would exit
			time.Sleep(time.Hour)
		}
	}
	if _, err := os.Stat("/sys/class/net/eth0"); err == nil {
		// QEMU's user-mode network: the guest is 10.0.2.15.
		// Best effort: a guest without its network fails the probe that needs it.
		_ = exec.Command("ip", "link", "set", "lo", "up").Run()
		_ = exec.Command("ip", "link", "set", "eth0", "up").Run()
		_ = exec.Command("ip", "addr", "add", "10.0.2.15/24", "dev", "eth0").Run()
	}
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", guestvm.BootProbePort))
	if err != nil {
		fail("listen: %v", err)
	}
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "coffer guest") })) // serves until the guest stops
	}()
	say(guestvm.BootMarker)
	select {}
}

// say prints a line on the serial console and on the screen's first
// virtual terminal, where an installed system's getty shows its prompt:
// a guest booted through UEFI has a framebuffer console that shows
// nothing else (its kernel logs to the serial port only), and a blank
// screen fails boot verification's screenshot.
//
// The screen comes first: whoever waits for the line on the serial port
// then looks at a screen that has it (or is redrawing it).
func say(line string) {
	if tty, err := os.OpenFile("/dev/tty1", os.O_WRONLY, 0); err == nil {
		fmt.Fprintln(tty, line)
		_ = tty.Close()
	}
	fmt.Println(line)
}

// mountRoot mounts the root file system of a guest booted from its own
// disk (guestvm.BuildBootDisk), read-only, as an installed system's
// initramfs would; when it does not mount, or is not the guest's, the
// guest stops there, as one dropped into an emergency shell: no login
// prompt ever shows.
func mountRoot(dev string) {
	// The kernel creates the partitions' nodes as it scans the disk,
	// which may end after PID 1 starts (a SCSI controller's scan, under
	// TCG, takes seconds): wait for the node, not a time.
	for i := 0; i < 3000; i++ {
		if _, err := os.Stat(dev); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = os.MkdirAll("/root", 0o755) // the mount below reports a missing mount point
	out, err := exec.Command("mount", "-t", "ext4", "-o", "ro", dev, "/root").CombinedOutput()
	if err == nil {
		_, err = os.Stat("/root/" + guestvm.RootMarkerFile)
	}
	if err != nil {
		fmt.Printf("COFFER BOOT cannot mount the root file system %s: %v %s\n", dev, err, out)
		say("Give root password for maintenance")
		for {
			time.Sleep(time.Hour)
		}
	}
	fmt.Println("COFFER BOOT root file system mounted")
}
