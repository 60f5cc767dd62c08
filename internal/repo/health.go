package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/store"
)

// HealthIssue is damage the repository found and worked around while
// opening (a damaged config or key file copy): nothing is lost, and a
// repair rewrites the damaged object from an intact copy.
type HealthIssue struct {
	Kind   string `json:"kind"` // "config" or "key"
	Object string `json:"object"`
	Detail string `json:"detail"`
}

// Repair is the command that mends the issue.
func (h HealthIssue) Repair() string {
	if h.Kind == "config" {
		return "coffer repair config"
	}
	return "coffer repair keys"
}

// Health lists what Open worked around.
func (r *Repository) Health() []HealthIssue { return append([]HealthIssue(nil), r.health...) }

// RepairConfig writes the config again from the authenticated copy that
// the key file which opened the repository carries. It returns what it did
// (or, with dryRun, would do).
func (r *Repository) RepairConfig(ctx context.Context, dryRun bool) ([]string, error) {
	damaged := false
	for _, h := range r.health {
		damaged = damaged || h.Kind == "config"
	}
	if !damaged {
		return []string{"the config matches its authenticated copy; nothing to do"}, nil
	}
	if r.unlocked == nil || r.unlocked.payload.Config == nil {
		return nil, errors.New("the key that opened the repository carries no copy of the config")
	}
	raw, err := r.cfg.encode()
	if err != nil {
		return nil, err
	}
	steps := []string{"write the config again from the authenticated copy in key " + short(r.keyID)}
	if dryRun {
		return steps, nil
	}
	if _, err := store.Put(ctx, r.st, configName, raw, store.PutOptions{}); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	return steps, nil
}

// RepairKeys writes the damaged or missing copy of every key file again
// from its intact copy: the one that opened the repository for this
// password's key, the only one that parses for other keys. Where two
// copies of another key both parse but differ, only that key's password
// can tell which is intact, and it is left alone.
func (r *Repository) RepairKeys(ctx context.Context, dryRun bool) ([]string, error) {
	objs, err := readKeyObjects(ctx, r.st)
	if err != nil {
		return nil, err
	}
	var steps []string
	for _, k := range objs {
		if bytes.Equal(k.raw[0], k.raw[1]) {
			continue
		}
		var good []byte
		switch {
		case r.unlocked != nil && k.id == r.keyID:
			good = r.unlocked.good
		case k.parsed[0] != nil && k.parsed[1] == nil:
			good = k.raw[0]
		case k.parsed[1] != nil && k.parsed[0] == nil:
			good = k.raw[1]
		default:
			steps = append(steps, fmt.Sprintf("key %s: its copies differ and both parse; open the repository with that key's password and run `coffer repair keys` again", short(k.id)))
			continue
		}
		for i, name := range keyNames(k.id) {
			if bytes.Equal(k.raw[i], good) {
				continue
			}
			steps = append(steps, "write "+name+" again from the intact copy")
			if dryRun {
				continue
			}
			if _, err := store.Put(ctx, r.st, name, good, store.PutOptions{}); err != nil {
				return steps, fmt.Errorf("write %s: %w", name, err)
			}
		}
	}
	if len(steps) == 0 {
		steps = append(steps, "every key file has two intact copies; nothing to do")
	}
	return steps, nil
}
