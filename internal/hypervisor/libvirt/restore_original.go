package libvirt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// originalState journals a restore onto the original domain: the
// temporary file written beside each disk, whether the files have begun
// to replace the disks, and coffer's checkpoints, which go once they have.
// Until the renames a crash leaves the domain as it was (cleanup removes
// the temporary files); from then on cleanup finishes the renames, so the
// domain never boots with some disks from the backup point and others
// from before.
type originalState struct {
	Disks       map[string]originalDisk `json:"disks"` // by target (vda)
	Checkpoints []string                `json:"checkpoints,omitempty"`
	Renaming    bool                    `json:"renaming,omitempty"`
}

type originalDisk struct {
	Path    string `json:"path"`   // the domain's disk file
	Format  string `json:"format"` // qcow2 or raw, as the domain has it
	Written bool   `json:"written,omitempty"`
}

// temp is the complete replacement of the disk, renamed over it last;
// rawTemp is the raw stage a qcow2 replacement is converted from.
func (d originalDisk) temp() string    { return d.Path + ".coffer-restore" }
func (d originalDisk) rawTemp() string { return d.Path + ".coffer-restore.raw" }

// restoreOriginal prepares writing a backup point back onto the domain it
// was taken from, which the caller asks for only after an explicit
// confirmation (NewVMOptions.ReplaceExisting). The domain is found by its
// recorded UUID (else its name); it must be shut off, have no snapshots
// and no checkpoints of other tools, and still have every recorded disk as
// a file of the same size under the same target. coffer's checkpoints go
// with the old disk files, which hold their bitmaps, so the next backup is
// full. Nothing else of the definition changes.
func (c *Connector) restoreOriginal(ctx context.Context, lv *golibvirt.Libvirt, cfg hypervisor.VMConfig, o hypervisor.NewVMOptions) (hypervisor.NewVM, error) {
	dom, err := c.lookup(ctx, lv, hypervisor.VMRef{ID: cfg.UUID})
	if errors.Is(err, hypervisor.ErrNotFound) || cfg.UUID == "" {
		dom, err = c.lookup(ctx, lv, hypervisor.VMRef{Name: nameOr(o.Name, cfg.Name)})
	}
	if err != nil {
		return nil, fmt.Errorf("libvirt: the original domain %s: %w", cfg.Name, err)
	}
	st, err := call(ctx, c.cfg.CallTimeout, "state of "+dom.Name, func() (int32, error) {
		s, _, err := lv.DomainGetState(dom, 0)
		return s, err
	})
	if err != nil {
		return nil, err
	}
	if s := golibvirt.DomainState(st); s != golibvirt.DomainShutoff && s != golibvirt.DomainCrashed {
		return nil, fmt.Errorf("libvirt: domain %s is %s; coffer never overwrites the disks of a running domain: shut it down first (virsh shutdown %s)",
			dom.Name, stateName(st), dom.Name)
	}
	snaps, err := call(ctx, c.cfg.CallTimeout, "count snapshots of "+dom.Name, func() (int32, error) { return lv.DomainSnapshotNum(dom, 0) })
	if err != nil {
		return nil, err
	}
	if snaps > 0 {
		// Its disks may be overlays of a snapshot chain: replacing the
		// current file would orphan or corrupt the chain.
		return nil, fmt.Errorf("libvirt: domain %s has %d snapshot(s); delete them before restoring onto its disks: %w", dom.Name, snaps, hypervisor.ErrUnsupported)
	}
	cps, err := c.checkpoints(ctx, lv, dom)
	if err != nil {
		return nil, err
	}
	var ours, foreign []string
	for name := range cps {
		if strings.HasPrefix(name, checkpointPrefix) {
			ours = append(ours, name)
		} else {
			foreign = append(foreign, name)
		}
	}
	if len(foreign) > 0 {
		sort.Strings(foreign)
		return nil, fmt.Errorf("libvirt: domain %s has checkpoints coffer did not create (%s), whose bitmaps the restored disks would not have: "+
			"delete them first, or restore as a new domain", dom.Name, strings.Join(foreign, ", "))
	}
	disks, err := c.originalDisks(ctx, lv, dom, cfg)
	if err != nil {
		return nil, err
	}
	u := formatUUID(dom.UUID)
	v := &originalDomain{c: c, lv: lv, dom: dom, j: &journal{path: filepath.Join(journalDir(c.cfg.StateDir), "restore-original-"+u+".json"), journalState: journalState{
		URI: c.cfg.URI, DomainUUID: u, DomainName: dom.Name, SessionID: "restore onto " + dom.Name, Created: time.Now(), PID: os.Getpid(),
		Original: &originalState{Disks: disks, Checkpoints: ours},
	}}}
	if _, err := os.Stat(v.j.path); err == nil {
		return nil, fmt.Errorf("libvirt: a restore onto %s is already under way (journal %s)", dom.Name, v.j.path)
	}
	if err := v.j.save(); err != nil {
		return nil, fmt.Errorf("libvirt: journal: %w", err)
	}
	return v, nil
}

// originalDisks checks that every recorded disk is still the domain's, as
// a file of the recorded size under the same target.
func (c *Connector) originalDisks(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, cfg hypervisor.VMConfig) (map[string]originalDisk, error) {
	doc, err := call(ctx, c.cfg.CallTimeout, "describe domain "+dom.Name, func() (string, error) { return lv.DomainGetXMLDesc(dom, 0) })
	if err != nil {
		return nil, err
	}
	cur, err := parseDomain(doc)
	if err != nil {
		return nil, err
	}
	byTarget := map[string]diskXML{}
	for _, d := range cur.Devices.Disks {
		byTarget[d.Target.Dev] = d
	}
	out := map[string]originalDisk{}
	for _, d := range cfg.Disks {
		x, ok := byTarget[d.Key]
		if !ok || !x.backedUp() {
			return nil, fmt.Errorf("libvirt: domain %s no longer has disk %s; restore as a new domain instead", dom.Name, d.Key)
		}
		if x.Type != "file" || x.Source.File == "" {
			return nil, fmt.Errorf("libvirt: disk %s of %s is a %s disk, and only file disks are restored in place: %w", d.Key, dom.Name, x.Type, hypervisor.ErrUnsupported)
		}
		if f := x.format(); f != "qcow2" && f != "raw" {
			return nil, fmt.Errorf("libvirt: disk %s of %s is %s; only qcow2 and raw files are restored in place: %w", d.Key, dom.Name, f, hypervisor.ErrUnsupported)
		}
		size, err := call(ctx, c.cfg.CallTimeout, "size of "+d.Key, func() (uint64, error) {
			_, capacity, _, err := lv.DomainGetBlockInfo(dom, d.Key, 0)
			return capacity, err
		})
		if err != nil {
			return nil, err
		}
		if int64(size) != d.Size {
			return nil, fmt.Errorf("libvirt: disk %s of %s is %d bytes now, %d in the backup point; restore as a new domain instead", d.Key, dom.Name, size, d.Size)
		}
		out[d.Key] = originalDisk{Path: x.Source.File, Format: x.format()}
	}
	return out, nil
}

// originalDomain is the original domain being restored onto.
type originalDomain struct {
	c   *Connector
	lv  *golibvirt.Libvirt
	dom golibvirt.Domain
	mu  sync.Mutex
	j   *journal
}

// Ref implements hypervisor.NewVM.
func (v *originalDomain) Ref() hypervisor.VMRef {
	return hypervisor.VMRef{ID: v.j.DomainUUID, Name: v.j.DomainName}
}

// WriteDisk implements hypervisor.NewVM: the point's disk is written to a
// new file beside the domain's (same filesystem, same owner and mode, in
// the disk's own format). When the last disk is written, all of them
// replace the domain's files by rename.
func (v *originalDomain) WriteDisk(ctx context.Context, key string, src hypervisor.DiskSource) error {
	v.mu.Lock()
	d, ok := v.j.Original.Disks[key]
	v.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: the domain has no disk %s to restore onto", hypervisor.ErrNotFound, key)
	}
	if err := writeReplacement(ctx, d, src); err != nil {
		removeTemps(d)
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	d.Written = true
	v.j.Original.Disks[key] = d
	for _, d := range v.j.Original.Disks {
		if !d.Written {
			return v.j.save()
		}
	}
	v.j.Original.Renaming = true
	if err := v.j.save(); err != nil {
		return err
	}
	if err := v.c.finishOriginal(ctx, v.lv, v.dom, v.j.Original); err != nil {
		return fmt.Errorf("libvirt: replacing the disks of %s (the next start finishes it): %w", v.j.DomainName, err)
	}
	return v.j.remove()
}

// writeReplacement writes the disk's replacement file, synced, with the
// original's owner and mode (libvirt may have given the file to qemu).
func writeReplacement(ctx context.Context, d originalDisk, src hypervisor.DiskSource) error {
	info, err := os.Stat(d.Path)
	if err != nil {
		return err
	}
	removeTemps(d) // an earlier attempt's
	raw := d.temp()
	if d.Format == "qcow2" {
		raw = d.rawTemp()
	}
	if err := writeSparse(raw, src); err != nil {
		return err
	}
	if d.Format == "qcow2" {
		out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, d.temp()).CombinedOutput()
		if err != nil {
			return fmt.Errorf("libvirt: qemu-img convert: %v: %s", err, out)
		}
		if err := os.Remove(raw); err != nil {
			return err
		}
		if err := syncFile(d.temp()); err != nil {
			return err
		}
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		if err := os.Chown(d.temp(), int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	return os.Chmod(d.temp(), info.Mode().Perm())
}

// replaceDisks renames each written replacement over its disk; one whose
// replacement is gone was renamed already (by an interrupted attempt).
func replaceDisks(s *originalState) error {
	var errs []error
	for _, d := range s.Disks {
		err := os.Rename(d.temp(), d.Path)
		if err == nil {
			err = statefile.SyncDir(filepath.Dir(d.Path))
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeTemps(d originalDisk) {
	_ = os.Remove(d.temp()) // best effort: the restore has failed already
	_ = os.Remove(d.rawTemp())
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Start implements hypervisor.NewVM.
func (v *originalDomain) Start(ctx context.Context) error {
	return do(ctx, v.c.cfg.CallTimeout, "start domain "+v.j.DomainName, func() error { return v.lv.DomainCreate(v.dom) })
}

// Abort implements hypervisor.NewVM: before the renames, the replacement
// files go and the domain's disks stay as they were; once the renames
// have begun, they are finished instead.
func (v *originalDomain) Abort(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.c.finishOriginal(ctx, v.lv, v.dom, v.j.Original); err != nil {
		return err
	}
	return v.j.remove()
}

// finishOriginal brings a restore onto the original to one end: forward
// when its renames had begun (the disks replaced, then coffer's
// checkpoints forgotten), back otherwise (the replacement files removed).
func (c *Connector) finishOriginal(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, s *originalState) error {
	if !s.Renaming {
		for _, d := range s.Disks {
			removeTemps(d)
		}
		return nil
	}
	if err := replaceDisks(s); err != nil {
		return err
	}
	for _, name := range s.Checkpoints {
		if err := c.forgetCheckpoint(ctx, lv, dom, name); err != nil {
			return err
		}
	}
	return nil
}

func nameOr(name, fallback string) string {
	if name != "" {
		return name
	}
	return fallback
}
