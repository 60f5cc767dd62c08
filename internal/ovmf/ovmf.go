// Package ovmf finds OVMF, the UEFI firmware QEMU boots EFI guests with,
// where distributions install it: boot verification starts EFI vSphere
// points with it, and the test guests that boot through UEFI use it too.
package ovmf

import "os"

// Firmware is OVMF's read-only code and the template of its variable
// store, which each VM gets a copy of. Code alone (Vars empty) is a
// firmware with its variables built in (OVMF.fd).
type Firmware struct {
	Code, Vars string
}

// paths are where distributions install OVMF, as code and variable store
// pairs, most specific first.
var paths = []Firmware{
	{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"}, // Debian 12, Ubuntu 22.04+
	{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"},
	{"/usr/share/edk2/ovmf/OVMF_CODE.fd", "/usr/share/edk2/ovmf/OVMF_VARS.fd"}, // Fedora, RHEL
	{"/usr/share/edk2/x64/OVMF_CODE.fd", "/usr/share/edk2/x64/OVMF_VARS.fd"},   // Arch
	{"/usr/share/qemu/OVMF.fd", ""},
}

// Find returns this host's OVMF; ok is false when none is installed
// (Debian: the ovmf package).
func Find() (fw Firmware, ok bool) {
	for _, p := range paths {
		if exists(p.Code) && (p.Vars == "" || exists(p.Vars)) {
			return p, true
		}
	}
	return Firmware{}, false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
