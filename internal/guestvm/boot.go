package guestvm

// Boot behaviours of a guest in Mode "boot", chosen by the first byte of
// its disk: the disk is what a backup point captures, so each point of one
// guest boots the way its disk says. Boot verification's tests flip the
// byte on the running guest (it reads it only when it boots) and back it
// up.
const (
	BootPanic = 'P' // PID 1 exits: the kernel panics
	BootHang  = 'H' // the console never shows the login prompt
	// Any other byte boots well: the network comes up (when the VM has a
	// NIC), HTTP answers 200 on BootProbePort, and the console shows
	// BootMarker.
)

// BootProbePort is where a well-booting guest serves HTTP.
const BootProbePort = 8080

// BootMarker is the console line a well-booting guest prints last.
const BootMarker = "coffer-guest login:"
