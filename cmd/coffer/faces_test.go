package main

import (
	"sort"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli"
	"github.com/coffer-backup/coffer/internal/console"
	hvall "github.com/coffer-backup/coffer/internal/hypervisor/all"
	"github.com/coffer-backup/coffer/internal/server"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/operations"
)

// faces lists, for every face of coffer, the service operations it offers:
// the command line's commands, the REST API's routes (registered from the
// operation table, and read back from the server's OpenAPI document), and
// the web console's pages and actions (the operations each route
// declares, the only ones it may call), so that they are held to the
// same list.
var faces = map[string]func(t *testing.T) map[string]bool{
	"command line": commandLineOperations,
	"REST API":     func(*testing.T) map[string]bool { return server.OperationIDs() },
	"console":      func(*testing.T) map[string]bool { return console.OperationIDs() },
}

// exempt says why a face does not offer an operation ("" when it must).
func exempt(face string, op service.Operation) string {
	if op.Internal != "" {
		return op.Internal // coffer's processes run it by ID: no face offers it
	}
	switch face {
	case "command line":
		return op.NotOnCommandLine // a browser session's sign-in and sign-out
	case "console":
		return op.NoConsole // a host's own business, or what the console does otherwise
	}
	return ""
}

// commandLineOperations are the operations the CLI's commands declare.
// A command that runs none must say why (the command line's own business:
// its settings, the demo, the server loop).
func commandLineOperations(t *testing.T) map[string]bool {
	out := map[string]bool{}
	for path, c := range cli.CommandOperations() {
		if len(c.Operations) == 0 && c.FaceOnly == "" {
			t.Errorf("command line: `coffer %s` runs no service operation and does not say why", path)
		}
		if len(c.Operations) > 0 && c.FaceOnly != "" {
			t.Errorf("command line: `coffer %s` runs operations but also calls itself the command line's own", path)
		}
		for _, id := range c.Operations {
			out[id] = true
		}
	}
	return out
}

// TestEveryFaceOffersEveryOperation lists the service's operations and
// each face's, and fails on a gap either way: an operation a face lacks
// (and whose row does not say why: NotOnCommandLine, NoConsole), a face
// offering an operation the service does not define, or one whose row
// says the face does not offer it.
func TestEveryFaceOffersEveryOperation(t *testing.T) {
	defined := map[string]bool{}
	for _, op := range operations.All {
		defined[op.ID] = true
	}
	for face, list := range faces {
		offered := list(t)
		var missing, unknown []string
		var stale []string
		for _, op := range operations.All {
			if !offered[op.ID] && exempt(face, op) == "" {
				missing = append(missing, op.ID)
			}
			if offered[op.ID] && exempt(face, op) != "" {
				stale = append(stale, op.ID)
			}
		}
		for id := range offered {
			if !defined[id] {
				unknown = append(unknown, id)
			}
		}
		sort.Strings(missing)
		sort.Strings(unknown)
		if len(missing) > 0 {
			t.Errorf("%s: no way to run %s", face, strings.Join(missing, ", "))
		}
		if len(stale) > 0 {
			t.Errorf("%s: offers %s, whose row says why it does not", face, strings.Join(stale, ", "))
		}
		if len(unknown) > 0 {
			t.Errorf("%s: offers %s, which the service does not define", face, strings.Join(unknown, ", "))
		}
	}
}

// TestNoTestDoubleInTheBinary: the simulated fleet is registered by test
// binaries only (servicetest.RegisterFake; depguard keeps its packages out
// of production code), so the binary's registry knows real platforms.
func TestNoTestDoubleInTheBinary(t *testing.T) {
	if got := strings.Join(hvall.Kinds(), ","); got != "libvirt,qemu,vsphere" {
		t.Fatalf("the binary's connector kinds are %s, want libvirt,qemu,vsphere", got)
	}
}
