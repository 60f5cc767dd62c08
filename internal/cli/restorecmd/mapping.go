package restorecmd

import (
	"github.com/coffer-backup/coffer/internal/api"
)

// printMapping shows how a VM maps onto another platform: what is
// carried over, what is not, and what the guest needs.
func (a *app) printMapping(m *api.VMMapping) {
	a.Printf("a %s VM as a %s VM:\n", m.From, m.To)
	for _, i := range m.Mapped {
		name := i.Name
		if name == i.Kind {
			name = "" // cpus, memory, firmware: one of a kind
		}
		a.Printf("  %-8s %-14s %s -> %s", i.Kind, name, i.From, i.To)
		if i.Note != "" {
			a.Printf(" (%s)", i.Note)
		}
		a.Printf("\n")
	}
	if len(m.Unmapped) > 0 {
		a.Printf("cannot map:\n")
		for _, i := range m.Unmapped {
			to := ""
			if i.To != "" {
				to = " -> " + i.To
			}
			a.Printf("  %-8s %-14s %s%s: %s\n", i.Kind, i.Name, i.From, to, i.Note)
		}
	}
	if len(m.Needs) > 0 {
		a.Printf("the guest needs:\n")
		for _, n := range m.Needs {
			a.Printf("  - %s\n", n)
		}
	}
}
