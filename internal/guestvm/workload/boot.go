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
func boot(disk string) {
	b := make([]byte, 1)
	if f, err := os.Open(disk); err == nil {
		f.Read(b)
		f.Close()
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
		exec.Command("ip", "link", "set", "lo", "up").Run()
		exec.Command("ip", "link", "set", "eth0", "up").Run()
		exec.Command("ip", "addr", "add", "10.0.2.15/24", "dev", "eth0").Run()
	}
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", guestvm.BootProbePort))
	if err != nil {
		fail("listen: %v", err)
	}
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "coffer guest") }))
	fmt.Println(guestvm.BootMarker)
	select {}
}
