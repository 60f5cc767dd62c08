package libvirt

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// InstantCommit moves the domain of an instant recovery onto local files
// while it runs: libvirt's block copy (virDomainBlockCopy) copies each
// disk, overlay and what it still reads from the backup, to
// target/NAME-KEY.FORMAT, and once the copy mirrors the disk it pivots to
// it. target is a storage pool's name or a directory. The overlays are
// removed when every disk has switched; from then on the domain reads
// nothing from coffer. A disk already switched (a commit that was
// interrupted) is not copied again. It returns the new files by disk key.
func (c *Connector) InstantCommit(ctx context.Context, vm hypervisor.InstantVM, target, format string) (map[string]string, error) {
	if format != "raw" && format != "qcow2" {
		return nil, fmt.Errorf("libvirt: target format must be raw or qcow2, not %q", format)
	}
	lv, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	unlock := c.lockDomain(vm.Ref.ID)
	defer unlock()
	dom, err := c.lookup(ctx, lv, hypervisor.VMRef{ID: vm.Ref.ID})
	if err != nil {
		return nil, err
	}
	dir, err := c.targetDir(ctx, lv, target)
	if err != nil {
		return nil, err
	}
	current, err := c.diskSources(ctx, lv, dom)
	if err != nil {
		return nil, err
	}
	j := &journal{path: filepath.Join(journalDir(c.cfg.StateDir), "instant-"+vm.Ref.ID+".json"), journalState: journalState{
		URI: c.cfg.URI, DomainUUID: vm.Ref.ID, DomainName: vm.Ref.Name, SessionID: "instant commit " + vm.Ref.Name, Created: time.Now(), PID: os.Getpid(),
		Instant: &instantState{Overlays: vm.Overlays, Committing: true, Targets: map[string]string{}, Pivoted: map[string]bool{}},
	}}
	for key, overlay := range vm.Overlays {
		p := filepath.Join(dir, vm.Ref.Name+"-"+key+"."+format)
		j.Instant.Targets[key] = p
		if current[key] != overlay {
			if current[key] != p {
				return nil, fmt.Errorf("libvirt: disk %s of %s runs from %s, neither its overlay nor %s", key, vm.Ref.Name, current[key], p)
			}
			j.Instant.Pivoted[key] = true
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("libvirt: %s exists; commit to another place", p)
		}
	}
	if err := j.save(); err != nil {
		return nil, fmt.Errorf("libvirt: journal: %w", err)
	}
	for key := range vm.Overlays {
		if j.Instant.Pivoted[key] {
			continue
		}
		if err := c.copyAndPivot(ctx, lv, dom, key, j.Instant.Targets[key], format); err != nil {
			// Disks not yet switched keep running from the backup; the
			// journal's cleanup drops this disk's copy job and file.
			return nil, errors.Join(err, c.abortCommit(context.WithoutCancel(ctx), lv, j))
		}
		j.Instant.Pivoted[key] = true
		if err := j.save(); err != nil {
			return nil, err
		}
		crashPoint("instant-pivoted")
	}
	if err := c.persistTargets(ctx, lv, dom, j.Instant.Targets, format); err != nil {
		return nil, err
	}
	for _, p := range vm.Overlays {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	return j.Instant.Targets, j.remove()
}

// abortCommit drops the copy jobs and files of the disks that did not
// switch; the journal stays only when that fails.
func (c *Connector) abortCommit(ctx context.Context, lv *golibvirt.Libvirt, j *journal) error {
	if _, err := c.cleanupInstant(ctx, lv, j); err != nil {
		return errors.Join(err, j.save())
	}
	return j.remove()
}

// copyAndPivot copies one disk with a block copy job and switches the
// domain to the copy once the job mirrors it.
func (c *Connector) copyAndPivot(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, key, path, format string) error {
	dest := fmt.Sprintf(`<disk type='file'><driver type='%s'/><source file='%s'/></disk>`, format, xmlEscape(path))
	if err := do(ctx, c.cfg.CallTimeout, "start block copy of "+key, func() error {
		// A persistent domain's copy must be a transient job (libvirt
		// does not keep it across a restart); its definition is updated
		// after the pivots (persistTargets).
		return lv.DomainBlockCopy(dom, key, dest, nil, golibvirt.DomainBlockCopyTransientJob)
	}); err != nil {
		return err
	}
	crashPoint("instant-copying")
	for {
		// libvirt reports cur == end only once the copy is ready to pivot.
		info, err := call(ctx, c.cfg.CallTimeout, "block copy progress of "+key, func() ([3]uint64, error) {
			found, _, _, cur, end, err := lv.DomainGetBlockJobInfo(dom, key, 0)
			return [3]uint64{uint64(found), cur, end}, err
		})
		if err != nil {
			return err
		}
		if info[0] == 0 {
			return fmt.Errorf("libvirt: the block copy of %s ended before it was ready (see the domain's log)", key)
		}
		if info[2] > 0 && info[1] == info[2] {
			err := do(ctx, c.cfg.CallTimeout, "pivot "+key+" to "+path, func() error {
				return lv.DomainBlockJobAbort(dom, key, golibvirt.DomainBlockJobAbortPivot)
			})
			if err == nil {
				return nil
			}
			if !isLibvirtError(err, golibvirt.ErrBlockCopyActive) && !isLibvirtError(err, golibvirt.ErrOperationInvalid) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling interval
		}
	}
}

// cleanupInstant undoes what a dead coffer journalled for an instant
// recovery's domain: a start that did not finish removes the domain and
// its overlays; a commit that did not finish aborts the copy jobs of the
// disks that did not switch and removes their copies (the domain goes on
// running from the backup, and the commit can be run again).
func (c *Connector) cleanupInstant(ctx context.Context, lv *golibvirt.Libvirt, j *journal) ([]hypervisor.Leftover, error) {
	ref := hypervisor.VMRef{ID: j.DomainUUID, Name: j.DomainName}
	if !j.Instant.Committing {
		if err := c.removeInstant(ctx, lv, &j.journalState); err != nil {
			return nil, err
		}
		return []hypervisor.Leftover{{VM: ref, Kind: "instant-vm", Name: j.DomainName, Action: "removed (its instant recovery did not start)"}}, nil
	}
	dom, err := c.lookup(ctx, lv, hypervisor.VMRef{ID: j.DomainUUID})
	if errors.Is(err, hypervisor.ErrNotFound) {
		return []hypervisor.Leftover{{VM: ref, Kind: "journal", Name: j.SessionID, Action: "domain gone; journal dropped"}}, nil
	}
	if err != nil {
		return nil, err
	}
	var out []hypervisor.Leftover
	for key, p := range j.Instant.Targets {
		if j.Instant.Pivoted[key] {
			continue
		}
		err := do(ctx, c.cfg.CallTimeout, "abort block copy of "+key, func() error {
			return lv.DomainBlockJobAbort(dom, key, 0)
		})
		if err != nil && !isLibvirtError(err, golibvirt.ErrOperationInvalid) && !isLibvirtError(err, golibvirt.ErrInvalidArg) {
			return out, err
		}
		if err == nil {
			out = append(out, hypervisor.Leftover{VM: ref, Kind: "job", Name: "block copy " + key, Action: "aborted; the disk runs from the backup"})
		}
		if err := os.Remove(p); err == nil {
			out = append(out, hypervisor.Leftover{VM: ref, Kind: "file", Name: p, Action: "removed (an unfinished copy)"})
		} else if !os.IsNotExist(err) {
			return out, err
		}
	}
	return append(out, hypervisor.Leftover{VM: ref, Kind: "journal", Name: j.SessionID, Action: "removed; run the commit again"}), nil
}

// persistTargets points the domain's persistent definition at the
// copies: a pivot changes only the running domain's, and the next boot
// would look for the overlays.
func (c *Connector) persistTargets(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, targets map[string]string, format string) error {
	return do(ctx, c.cfg.CallTimeout, "update the definition of "+dom.Name, func() error {
		doc, err := lv.DomainGetXMLDesc(dom, golibvirt.DomainXMLInactive|golibvirt.DomainXMLSecure)
		if err != nil {
			return err
		}
		disks := map[string]newDisk{}
		for key, p := range targets {
			disks[key] = newDisk{Path: p, Format: format}
		}
		doc, err = rewriteDisks(doc, disks)
		if err != nil {
			return err
		}
		_, err = lv.DomainDefineXML(doc)
		return err
	})
}

// diskSources are the files the domain's disks run from now, by target.
func (c *Connector) diskSources(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain) (map[string]string, error) {
	doc, err := call(ctx, c.cfg.CallTimeout, "read domain definition", func() (string, error) {
		return lv.DomainGetXMLDesc(dom, 0)
	})
	if err != nil {
		return nil, err
	}
	d, err := parseDomain(doc)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, dx := range d.Devices.Disks {
		out[dx.Target.Dev] = dx.path()
	}
	return out, nil
}

// targetDir is a pool's directory, or target itself as an absolute path.
func (c *Connector) targetDir(ctx context.Context, lv *golibvirt.Libvirt, target string) (string, error) {
	if target == "" {
		return "", errors.New("libvirt: no commit target (a storage pool or a directory)")
	}
	if !strings.Contains(target, "/") {
		pools, err := c.pools(ctx, lv)
		if err != nil {
			return "", err
		}
		for _, p := range pools {
			if p.name == target && p.dir != "" {
				return p.dir, nil
			}
		}
	}
	dir, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("libvirt: commit target %q is neither an active storage pool with a directory nor a directory", target)
	}
	return dir, nil
}

// fileOwner is the owner of path.
func fileOwner(path string) (int, int, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, 0, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(sys.Uid), int(sys.Gid), true
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
