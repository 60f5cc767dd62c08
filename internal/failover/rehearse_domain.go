package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
)

// DomainCopies starts a test failover's copies of standbys kept as VMs
// of the DR host's hypervisor (libvirt): throw-away VMs the hypervisor
// runs on the test's overlays, isolated, under names of their own.
type DomainCopies interface {
	// Host names the DR host's connection: a run records it with each
	// copy, so that RemoveLeftoversOf can end a killed run's.
	Host() string
	StartCopy(ctx context.Context, cfg hypervisor.VMConfig, cp hypervisor.TestCopy) error
	// DestroyCopy ends the copy named name; one that is gone is no error.
	DestroyCopy(ctx context.Context, name string) error
}

// CopyDestroyer ends a killed test failover's copy named name on the
// host its run recorded.
type CopyDestroyer func(ctx context.Context, host, name string) error

// copyRecordName is the record of a VM's copy in its directory of a test
// run, written before the copy or its overlays exist.
const copyRecordName = "copy.json"

// copyRecord says where a test failover's copy of a standby runs, and
// where its overlays are: next to the standby, where the hypervisor's
// QEMU reaches them (the state directory is coffer's own).
type copyRecord struct {
	Host string `json:"host"`
	Name string `json:"name"`
	Dir  string `json:"dir"`
}

// copyDirPrefix names a copy's directory in its standby's directory.
const copyDirPrefix = ".test-failover-"

// rehearseCopy starts vm's copy, on the host's hypervisor, for a test
// failover whose VM directory is dir. The machine it returns, even with
// an error, discards what was made.
func rehearseCopy(ctx context.Context, vm VM, g Group, dir, run string, seq int) (*machine, error) {
	if vm.CloudInit != "" {
		return nil, fmt.Errorf("%s: cloud-init data is attached to QEMU standbys only, not yet to a copy of a standby domain", vm.Name)
	}
	def, pt, err := loadStandby(vm, seq)
	if err != nil {
		return nil, err
	}
	standby, err := filepath.Abs(vm.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	rec := copyRecord{Host: vm.Copies.Host(), Name: hypervisor.TestCopyPrefix + run + "-" + fileName(vm.Name),
		Dir: filepath.Join(standby, copyDirPrefix+run)}
	if err := writeCopyRecord(dir, rec); err != nil {
		return nil, err
	}
	c := &domainCopy{rec: rec, destroy: vm.Copies.DestroyCopy}
	m := &machine{dir: rec.Dir, copy: c, forward: map[int]int{}}
	if err := os.Mkdir(rec.Dir, 0o700); err != nil {
		return m, err
	}
	if err := giveToDirOwner(rec.Dir); err != nil {
		return m, err
	}
	cp := hypervisor.TestCopy{Name: rec.Name, Disks: map[string]string{}, Forward: m.forward,
		ConsoleLog: filepath.Join(rec.Dir, "console.log")}
	for k, f := range pt.disks {
		ov := filepath.Join(rec.Dir, fileName(k)+".qcow2")
		if err := createOverlay(ctx, ov, f); err != nil {
			return m, err
		}
		if err := giveToDirOwner(ov); err != nil {
			return m, err
		}
		cp.Disks[k] = ov
	}
	for _, p := range g.Probes {
		if p.Kind == bootverify.ProbeExec {
			return m, fmt.Errorf("probe %s: a test failover of a standby domain has no guest agent channel of coffer's to run it through", p)
		}
		if m.forward[p.Port] == 0 {
			if m.forward[p.Port], err = qemu.FreePort(); err != nil {
				return m, err
			}
		}
	}
	return m, vm.Copies.StartCopy(ctx, def.Config, cp)
}

// domainCopy is a started copy: how to end it and remove its overlays.
type domainCopy struct {
	rec     copyRecord
	destroy func(ctx context.Context, name string) error
}

// discard ends the copy, then removes its overlays; a copy that could
// not be ended keeps them (it may still run on them).
func (c *domainCopy) discard(ctx context.Context) error {
	if err := c.destroy(ctx, c.rec.Name); err != nil {
		return fmt.Errorf("end the test copy %s: %w", c.rec.Name, err)
	}
	return os.RemoveAll(c.rec.Dir)
}

func writeCopyRecord(dir string, rec copyRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, copyRecordName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, copyRecordName))
}

// readCopyRecord is the copy record in a run's VM directory (nil: none).
func readCopyRecord(dir string) (*copyRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, copyRecordName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec copyRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, copyRecordName), err)
	}
	if filepath.Base(rec.Dir) == "." || !filepath.IsAbs(rec.Dir) || len(filepath.Base(rec.Dir)) <= len(copyDirPrefix) ||
		filepath.Base(rec.Dir)[:len(copyDirPrefix)] != copyDirPrefix {
		return nil, fmt.Errorf("%s names %q, not a test copy's directory", filepath.Join(dir, copyRecordName), rec.Dir)
	}
	return &rec, nil
}

// removeCopies ends the copies a killed run's VMs recorded and removes
// their overlays; an error when one could not be (the run is kept, so
// that a later clean-up ends it).
func removeCopies(ctx context.Context, run string, destroy CopyDestroyer) error {
	vms, _ := filepath.Glob(filepath.Join(run, "*"))
	var errs []error
	for _, d := range vms {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue // the run's lock
		}
		rec, err := readCopyRecord(d)
		if err != nil || rec == nil {
			errs = append(errs, err)
			continue
		}
		if destroy == nil {
			errs = append(errs, fmt.Errorf("the test copy %s on %s: no connection to end it through", rec.Name, rec.Host))
			continue
		}
		c := &domainCopy{rec: *rec, destroy: func(ctx context.Context, name string) error { return destroy(ctx, rec.Host, name) }}
		errs = append(errs, c.discard(ctx))
	}
	return errors.Join(errs...)
}

// startDetail describes how a test failover's VM started.
func startDetail(m *machine) string {
	if m != nil && m.copy != nil {
		return "as " + m.copy.rec.Name + " on " + m.copy.rec.Host + ", on overlays of its standby, isolated network"
	}
	if m != nil && m.discard != nil {
		return "as a linked clone of its standby's point, on an isolated port group"
	}
	return "on an overlay of its standby, isolated network"
}
