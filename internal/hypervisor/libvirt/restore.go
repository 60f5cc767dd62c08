package libvirt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// restoreState is the journal of a restore to a new domain: the domain and
// the files it creates, so a restore killed before its last disk was
// written leaves nothing after the next cleanup.
type restoreState struct {
	Name  string             `json:"name"`
	Disks map[string]newDisk `json:"disks"`
}

// CreateVM implements hypervisor.Restorer: a new domain defined from the
// recorded definition with a new name, UUID and MAC addresses, its disks
// written as new qcow2 (or raw) files in a storage pool's directory (the
// one the recorded disks were in, or opts.Datastore). With
// opts.ReplaceExisting it restores onto the original domain instead
// (restore_original.go).
func (c *Connector) CreateVM(ctx context.Context, cfg hypervisor.VMConfig, o hypervisor.NewVMOptions) (hypervisor.NewVM, error) {
	if cfg.Kind != "libvirt" {
		return nil, fmt.Errorf("%w: libvirt cannot restore a %q VM configuration", hypervisor.ErrUnsupported, cfg.Kind)
	}
	if err := c.elsewhere(); err != nil {
		return nil, err
	}
	if o.ReplaceExisting {
		lv, err := c.client(ctx)
		if err != nil {
			return nil, err
		}
		return c.restoreOriginal(ctx, lv, cfg, o)
	}
	if o.Name == "" {
		return nil, errors.New("libvirt: restore needs a name for the new domain")
	}
	var native NativeConfig
	if err := json.Unmarshal(cfg.Native, &native); err != nil || native.DomainXML == "" {
		return nil, fmt.Errorf("libvirt: the backup point records no domain definition")
	}
	format := o.DiskFormat
	if format == "" {
		format = "qcow2"
	}
	if format != "qcow2" && format != "raw" {
		return nil, fmt.Errorf("libvirt: disk format %q: qcow2 or raw", format)
	}
	lv, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.lookup(ctx, lv, hypervisor.VMRef{Name: o.Name}); err == nil {
		return nil, fmt.Errorf("libvirt: a domain named %q exists; choose another name", o.Name)
	} else if !errors.Is(err, hypervisor.ErrNotFound) {
		return nil, err
	}
	dir, err := c.restoreDir(ctx, lv, cfg, o)
	if err != nil {
		return nil, err
	}
	v := &newDomain{c: c, lv: lv, uuid: newUUID(), name: o.Name, written: map[string]bool{}}
	disks := map[string]newDisk{}
	for _, d := range cfg.Disks {
		disks[d.Key] = newDisk{Path: filepath.Join(dir, o.Name+"-"+d.Key+"."+format), Format: format}
		if _, err := os.Lstat(disks[d.Key].Path); err == nil {
			return nil, fmt.Errorf("libvirt: %s exists; choose another name", disks[d.Key].Path)
		}
	}
	doc, err := rewriteDomain(native.DomainXML, o.Name, v.uuid, disks)
	if err != nil {
		return nil, err
	}
	v.j = &journal{path: filepath.Join(journalDir(c.cfg.StateDir), "restore-"+v.uuid+".json"), journalState: journalState{
		URI: c.cfg.URI, DomainUUID: v.uuid, DomainName: o.Name, SessionID: "restore " + cfg.Name, Created: time.Now(), PID: os.Getpid(),
		Restore: &restoreState{Name: o.Name, Disks: disks},
	}}
	if err := v.j.save(); err != nil {
		return nil, fmt.Errorf("libvirt: journal: %w", err)
	}
	if _, err := call(ctx, c.cfg.CallTimeout, "define domain "+o.Name, func() (golibvirt.Domain, error) {
		return lv.DomainDefineXML(doc)
	}); err != nil {
		return nil, errors.Join(err, v.Abort(ctx))
	}
	return v, nil
}

// restoreDir is the directory of the pool the new disks go to.
func (c *Connector) restoreDir(ctx context.Context, lv *golibvirt.Libvirt, cfg hypervisor.VMConfig, o hypervisor.NewVMOptions) (string, error) {
	pools, err := c.pools(ctx, lv)
	if err != nil {
		return "", err
	}
	want := o.Datastore
	if want == "" && len(cfg.Disks) > 0 {
		want = cfg.Disks[0].Datastore
	}
	for _, p := range pools {
		if p.name == want && p.dir != "" {
			return p.dir, nil
		}
	}
	if o.TargetDir != "" {
		return o.TargetDir, nil
	}
	return "", fmt.Errorf("libvirt: no active storage pool %q with a directory for the restored disks (--datastore POOL)", want)
}

// newDomain is a domain being restored.
type newDomain struct {
	c       *Connector
	lv      *golibvirt.Libvirt
	uuid    string
	name    string
	j       *journal
	mu      sync.Mutex
	written map[string]bool
}

// Ref implements hypervisor.NewVM.
func (v *newDomain) Ref() hypervisor.VMRef { return hypervisor.VMRef{ID: v.uuid, Name: v.name} }

// WriteDisk implements hypervisor.NewVM: the allocated ranges into a
// sparse raw file, converted to qcow2 when asked, renamed into place last.
// Once every disk is written the restore is complete and its journal goes.
func (v *newDomain) WriteDisk(ctx context.Context, key string, src hypervisor.DiskSource) error {
	nd, ok := v.j.Restore.Disks[key]
	if !ok {
		return fmt.Errorf("%w: the recorded domain has no disk %s", hypervisor.ErrNotFound, key)
	}
	raw := nd.Path + ".coffer-tmp"
	if err := writeSparse(raw, src); err != nil {
		_ = os.Remove(raw) // best effort after the error returned
		return err
	}
	final := raw
	if nd.Format == "qcow2" {
		final = nd.Path + ".coffer-tmp.qcow2"
		out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, final).CombinedOutput()
		_ = os.Remove(raw) // a temporary, converted already or failed
		if err != nil {
			_ = os.Remove(final) // best effort after the error returned
			return fmt.Errorf("libvirt: qemu-img convert: %v: %s", err, out)
		}
	}
	if err := os.Rename(final, nd.Path); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.written[key] = true
	if len(v.written) == len(v.j.Restore.Disks) {
		return v.j.remove()
	}
	return nil
}

// writeSparse writes src's allocated ranges into a new sparse file.
func writeSparse(path string, src hypervisor.DiskSource) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // on an error; the end closes it checked
	if err := f.Truncate(src.Size()); err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	for _, e := range src.Allocated() {
		for off := e.Offset; off < e.Offset+e.Length; {
			n := min(int64(len(buf)), e.Offset+e.Length-off)
			if _, err := src.ReadAt(buf[:n], off); err != nil {
				return fmt.Errorf("libvirt: reading the backup at %d: %w", off, err)
			}
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return err
			}
			off += n
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// Start implements hypervisor.NewVM.
func (v *newDomain) Start(ctx context.Context) error {
	return do(ctx, v.c.cfg.CallTimeout, "start domain "+v.name, func() error {
		dom, err := v.lv.DomainLookupByName(v.name)
		if err != nil {
			return err
		}
		return v.lv.DomainCreate(dom)
	})
}

// Abort implements hypervisor.NewVM: the domain undefined and its new
// files removed.
func (v *newDomain) Abort(ctx context.Context) error {
	if err := v.c.removeRestored(ctx, v.lv, &v.j.journalState); err != nil {
		return err
	}
	return v.j.remove()
}

// removeRestored undefines a half-restored domain (by its journalled
// UUID, so never another one) and removes its files.
func (c *Connector) removeRestored(ctx context.Context, lv *golibvirt.Libvirt, j *journalState) error {
	u, err := parseUUID(j.DomainUUID)
	if err != nil {
		return err
	}
	err = do(context.WithoutCancel(ctx), c.cfg.CallTimeout, "remove half-restored domain "+j.DomainName, func() error {
		dom, err := lv.DomainLookupByUUID(u)
		if err != nil {
			return err
		}
		if st, _, err := lv.DomainGetState(dom, 0); err == nil && stateName(st) != "stopped" {
			if err := lv.DomainDestroy(dom); err != nil {
				return err
			}
		}
		return lv.DomainUndefineFlags(dom, golibvirt.DomainUndefineCheckpointsMetadata)
	})
	if err != nil && !isLibvirtError(err, golibvirt.ErrNoDomain) {
		return err
	}
	var errs []error
	for _, d := range j.Restore.Disks {
		for _, f := range []string{d.Path, d.Path + ".coffer-tmp", d.Path + ".coffer-tmp.qcow2"} {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
