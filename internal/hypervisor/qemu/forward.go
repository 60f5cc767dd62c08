package qemu

import (
	"fmt"
	"strings"
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
