package policy

import (
	"fmt"
	"path"

	"go.yaml.in/yaml/v3"
)

// Hook is a pair of commands run around a VM's snapshot so that the point
// is application-consistent: pre flushes and pauses an application (a
// database's CHECKPOINT, a backup mode), post resumes it. A filesystem
// freeze (snapshot: quiesced) alone cannot make a database flush its own
// state.
//
//	hooks:
//	  - name: postgres
//	    vms: ["db-*"]                # VM name globs; default every VM of the policy
//	    where: guest                 # guest (through the guest agent) or host (the backup host)
//	    pre: ["/usr/bin/psql", "-c", "CHECKPOINT"]
//	    post: ["/usr/local/bin/resume-app"]
//	    timeout: 30s                 # each command (default 1m)
//	    on-failure: continue         # or fail: no point when a pre command fails
type Hook struct {
	Name      string   `yaml:"name"`
	VMs       []string `yaml:"vms"`
	Where     string   `yaml:"where"`
	Pre       Command  `yaml:"pre"`
	Post      Command  `yaml:"post"`
	Timeout   Duration `yaml:"timeout"`
	OnFailure string   `yaml:"on-failure"`
}

// Command is a program and its arguments, run without a shell.
type Command []string

// UnmarshalYAML implements yaml.Unmarshaler: a command is a list, and a
// plain string is refused with what to write instead (splitting it on
// spaces would run something else than the operator meant whenever an
// argument holds a space or quotes).
func (c *Command) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return fmt.Errorf("line %d: a hook command is a list, program first: [%q] (for a shell line: [/bin/sh, -c, %q])", n.Line, n.Value, n.Value)
	}
	var argv []string
	if err := n.Decode(&argv); err != nil {
		return err
	}
	*c = argv
	return nil
}

// Hook places and failure handling.
const (
	HookGuest    = "guest"
	HookHost     = "host"
	HookContinue = "continue"
	HookFail     = "fail"
)

// AppliesTo reports whether the hook runs for the VM named vm.
func (h Hook) AppliesTo(vm string) bool {
	if len(h.VMs) == 0 {
		return true
	}
	for _, g := range h.VMs {
		if ok, _ := path.Match(g, vm); ok {
			return true
		}
	}
	return false
}

// HooksFor are the policy's hooks that run for the VM named vm, in order.
func (p Policy) HooksFor(vm string) []Hook {
	var out []Hook
	for _, h := range p.Hooks {
		if h.AppliesTo(vm) {
			out = append(out, h)
		}
	}
	return out
}

func (p Policy) validateHooks(where string, add func(string, ...any)) {
	seen := map[string]bool{}
	for i, h := range p.Hooks {
		hw := fmt.Sprintf("%s: hooks[%d]", where, i)
		if h.Name != "" {
			hw = where + ": hook " + h.Name
			if seen[h.Name] {
				add("%s is defined twice", hw)
			}
			seen[h.Name] = true
		}
		if h.Where != HookGuest && h.Where != HookHost {
			add("%s: where: %q is not guest (through the guest agent) or host (the backup host)", hw, h.Where)
		}
		if len(h.Pre) == 0 && len(h.Post) == 0 {
			add("%s: neither pre nor post gives a command (a list: [\"/path/to/program\", \"arg\", ...])", hw)
		}
		for _, c := range [][]string{h.Pre, h.Post} {
			if len(c) > 0 && c[0] == "" {
				add("%s: a command's program is empty", hw)
			}
		}
		if h.Timeout < 0 {
			add("%s: timeout must not be negative", hw)
		}
		oneOf(hw+": on-failure", h.OnFailure, add, "", HookContinue, HookFail)
		checkGlobs(hw+": vms", h.VMs, add)
	}
	if len(p.Hooks) > 0 && p.Group == "datastore" {
		// The VMs of a batch stay stopped until the storage snapshot, when
		// no guest agent answers; hooks there are not built yet.
		add("%s: hooks are not run with group: datastore; use group: vm for application-consistent points", where)
	}
}
