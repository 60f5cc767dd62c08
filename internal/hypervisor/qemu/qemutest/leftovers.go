// Package qemutest is what tests of real QEMU guests share across
// packages (the connector's own tests, and the fleet's, where a worker
// killed on its host must leave nothing behind): the inspection of what
// coffer left in a QEMU, through a monitor of the test's own. For tests
// only.
package qemutest

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
)

// NamedNode is a block node as query-named-block-nodes lists it, with its
// dirty bitmaps.
type NamedNode struct {
	Name    string `json:"node-name"`
	Bitmaps []struct {
		Name string `json:"name"`
	} `json:"dirty-bitmaps"`
}

// NamedNodes lists a QEMU's block nodes through the test's monitor.
func NamedNodes(ctx context.Context, adm *qmp.Client) ([]NamedNode, error) {
	var nodes []NamedNode
	err := adm.Execute(ctx, "query-named-block-nodes", nil, &nodes)
	return nodes, err
}

// Leftovers lists what coffer left in a QEMU beyond chain's tracking
// bitmaps (its full anchor and its newest incremental): coffer-* block
// nodes, exports other than keep, block jobs, other coffer bitmaps, and
// journals, fleecing overlays or memory files in the connection's state
// directory.
func Leftovers(ctx context.Context, adm *qmp.Client, state, chain, keep string) ([]string, error) {
	var left []string
	prefix := "coffer-" + hypervisor.ChainLabel(chain) + "-"
	nodes, err := NamedNodes(ctx, adm)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if strings.HasPrefix(n.Name, "coffer-") {
			left = append(left, "block node "+n.Name)
		}
		kept := 0
		for _, b := range n.Bitmaps {
			switch {
			case strings.HasPrefix(b.Name, prefix):
				if kept++; kept > 2 {
					left = append(left, "a third bitmap of the chain "+b.Name)
				}
			case strings.HasPrefix(b.Name, "coffer-"):
				left = append(left, "bitmap "+b.Name)
			}
		}
	}
	var exports []struct {
		ID string `json:"id"`
	}
	if err := adm.Execute(ctx, "query-block-exports", nil, &exports); err != nil {
		return nil, err
	}
	for _, e := range exports {
		if e.ID != keep {
			left = append(left, "export "+e.ID)
		}
	}
	var jobs []struct {
		Device string `json:"device"`
	}
	if err := adm.Execute(ctx, "query-block-jobs", nil, &jobs); err != nil {
		return nil, err
	}
	for _, j := range jobs {
		left = append(left, "block job "+j.Device)
	}
	for _, sub := range []string{"journal", "fleece"} {
		entries, err := os.ReadDir(filepath.Join(state, sub))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			left = append(left, filepath.Join(sub, e.Name()))
		}
	}
	return left, nil
}
