package qemu

import (
	"fmt"
	"net"
	"strings"
	"sync"
)

// forwardTries bounds how often LaunchForwarded chooses the ports again.
const forwardTries = 3

// ForwardTaken says whether err is QEMU refusing to start because a host
// port of a forwarding rule (IsolateSpec.Forward) was already bound.
func ForwardTaken(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Could not set up host forwarding rule")
}

// LaunchForwarded chooses a host port for each guest port with choose and
// calls launch with the forwards. A port is free when it is chosen, but
// another process may bind it before QEMU does, which QEMU then refuses
// to start with (ForwardTaken): the ports are chosen again and launch
// called again, up to three times. It returns the forwards of the launch
// that started, or of the last that failed.
func LaunchForwarded(guestPorts []int, choose func() (int, error), launch func(forward map[int]int) error) (map[int]int, error) {
	var forward map[int]int
	var err error
	for try := 1; try <= forwardTries; try++ {
		forward = map[int]int{}
		for _, p := range guestPorts {
			if forward[p] != 0 {
				continue
			}
			if forward[p], err = choose(); err != nil {
				return forward, err
			}
		}
		if err = launch(forward); !ForwardTaken(err) {
			return forward, err
		}
	}
	return forward, fmt.Errorf("%w (each of %d tries found a chosen port taken)", err, forwardTries)
}

// FreePort finds a free TCP port on 127.0.0.1 for a forward, one not
// given lately to another launch of this process: VMs starting at once
// each ask for ports, and a port one was given and has not bound yet is
// free again for the kernel to give another. (Another process may still
// take it: LaunchForwarded.)
func FreePort() (int, error) {
	for {
		port, err := listenFree()
		if err != nil || notGivenLately(port) {
			return port, err
		}
	}
}

func listenFree() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }() // only its port is wanted
	return l.Addr().(*net.TCPAddr).Port, nil
}

// givenPorts are the ports FreePort handed out lately in this process.
var givenPorts struct {
	sync.Mutex
	recent []int
}

// maxGivenPorts bounds givenPorts: the ports of the VMs starting now.
const maxGivenPorts = 256

// notGivenLately notes port as given and says whether it was not
// already, of the last maxGivenPorts.
func notGivenLately(port int) bool {
	givenPorts.Lock()
	defer givenPorts.Unlock()
	for _, p := range givenPorts.recent {
		if p == port {
			return false
		}
	}
	if len(givenPorts.recent) == maxGivenPorts {
		givenPorts.recent = givenPorts.recent[1:]
	}
	givenPorts.recent = append(givenPorts.recent, port)
	return true
}
