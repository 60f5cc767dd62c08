package libvirt

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
)

// instantState is the journal of an instant recovery's domain while
// coffer defines and starts it, and again while it commits it: cleanup
// undoes a start that did not finish (domain and overlays gone) and a
// commit that did not finish (copy jobs aborted, unused copies removed).
type instantState struct {
	Overlays map[string]string `json:"overlays"`
	// Committing: the domain runs; Targets are the copies being made and
	// Pivoted the disks that already switched to theirs.
	Committing bool              `json:"committing,omitempty"`
	Targets    map[string]string `json:"targets,omitempty"`
	Pivoted    map[string]bool   `json:"pivoted,omitempty"`
}

// InstantSocket is where coffer's NBD server for instant recovery session
// id listens: in the state directory's sockets subdirectory, which the
// QEMU processes libvirt runs can reach.
func (c *Connector) InstantSocket(id string) string {
	return filepath.Join(c.cfg.StateDir, "sockets", "instant-"+filepath.Base(id)+".sock")
}

// InstantStart defines and starts a new domain from the recorded
// definition (new name, UUID and MAC addresses, as a restore to a new
// domain) whose disks are qcow2 overlays in a pool's directory backed by
// exports of coffer's NBD server on o.Socket. The server must answer
// already: QEMU opens the backing files when the domain starts. The
// overlays and the socket are given to the user libvirt runs QEMU as.
func (c *Connector) InstantStart(ctx context.Context, cfg hypervisor.VMConfig, o hypervisor.InstantOptions) (hypervisor.InstantVM, error) {
	var native NativeConfig
	if cfg.Kind != "libvirt" || json.Unmarshal(cfg.Native, &native) != nil || native.DomainXML == "" {
		return hypervisor.InstantVM{}, fmt.Errorf("%w: the backup point records no libvirt domain definition", hypervisor.ErrUnsupported)
	}
	if o.Name == "" {
		return hypervisor.InstantVM{}, errors.New("libvirt: instant recovery needs a name for the new domain")
	}
	if err := c.elsewhere(); err != nil {
		return hypervisor.InstantVM{}, err
	}
	lv, err := c.client(ctx)
	if err != nil {
		return hypervisor.InstantVM{}, err
	}
	if _, err := c.lookup(ctx, lv, hypervisor.VMRef{Name: o.Name}); err == nil {
		return hypervisor.InstantVM{}, fmt.Errorf("libvirt: a domain named %q exists; choose another name", o.Name)
	} else if !errors.Is(err, hypervisor.ErrNotFound) {
		return hypervisor.InstantVM{}, err
	}
	dir, err := c.restoreDir(ctx, lv, cfg, hypervisor.NewVMOptions{Datastore: o.Datastore})
	if err != nil {
		return hypervisor.InstantVM{}, err
	}
	uuid := newUUID()
	vm := hypervisor.InstantVM{Ref: hypervisor.VMRef{ID: uuid, Name: o.Name}, Overlays: map[string]string{}}
	disks := map[string]newDisk{}
	for _, d := range cfg.Disks {
		p := filepath.Join(dir, o.Name+"-"+d.Key+".instant.qcow2")
		if _, err := os.Lstat(p); err == nil {
			return hypervisor.InstantVM{}, fmt.Errorf("libvirt: %s exists; choose another name", p)
		}
		vm.Overlays[d.Key] = p
		disks[d.Key] = newDisk{Path: p, Format: "qcow2", StopOnError: true}
	}
	doc, err := rewriteDomain(native.DomainXML, o.Name, uuid, disks)
	if err != nil {
		return hypervisor.InstantVM{}, err
	}
	j := &journal{path: filepath.Join(journalDir(c.cfg.StateDir), "instant-"+uuid+".json"), journalState: journalState{
		URI: c.cfg.URI, DomainUUID: uuid, DomainName: o.Name, SessionID: "instant " + cfg.Name, Created: time.Now(), PID: os.Getpid(),
		Instant: &instantState{Overlays: vm.Overlays},
	}}
	if err := j.save(); err != nil {
		return hypervisor.InstantVM{}, fmt.Errorf("libvirt: journal: %w", err)
	}
	fail := func(err error) (hypervisor.InstantVM, error) {
		if rerr := c.removeInstant(ctx, lv, &j.journalState); rerr != nil {
			return hypervisor.InstantVM{}, errors.Join(err, rerr)
		}
		return hypervisor.InstantVM{}, errors.Join(err, j.remove())
	}
	uid, gid := c.qemuOwner(ctx, lv, native.DomainXML, dir)
	for key, p := range vm.Overlays {
		if err := qemu.CreateNBDOverlay(ctx, p, o.Socket, key, o.Sizes[key], o.ReconnectDelay); err != nil {
			return fail(err)
		}
		if err := chown(p, uid, gid); err != nil {
			return fail(err)
		}
	}
	if err := chown(o.Socket, uid, gid); err != nil {
		return fail(err)
	}
	if err := do(ctx, c.cfg.CallTimeout, "define and start domain "+o.Name, func() error {
		dom, err := lv.DomainDefineXML(doc)
		if err != nil {
			return err
		}
		return lv.DomainCreate(dom)
	}); err != nil {
		return fail(err)
	}
	crashPoint("instant-started")
	// Running: from here the caller's session record owns the domain.
	return vm, j.remove()
}

// chown gives path to uid:gid when coffer may (runs as root) and knows
// the user (uid >= 0).
func chown(path string, uid, gid int) error {
	if uid < 0 || os.Geteuid() != 0 {
		return nil
	}
	return os.Chown(path, uid, gid)
}

// qemuOwner is the user and group libvirt runs the domain's QEMU as: the
// DAC security model's base label for its domain type, else the owner of
// the pool directory (a session daemon's user owns its pools); -1 when
// neither is known.
func (c *Connector) qemuOwner(ctx context.Context, lv *golibvirt.Libvirt, domXML, dir string) (int, int) {
	var dom struct {
		Type string `xml:"type,attr"`
	}
	_ = xml.Unmarshal([]byte(domXML), &dom)
	caps, err := call(ctx, c.cfg.CallTimeout, "read capabilities", lv.ConnectGetCapabilities)
	if err == nil {
		var cx struct {
			Host struct {
				SecModels []struct {
					Model  string `xml:"model"`
					Labels []struct {
						Type  string `xml:"type,attr"`
						Value string `xml:",chardata"`
					} `xml:"baselabel"`
				} `xml:"secmodel"`
			} `xml:"host"`
		}
		if xml.Unmarshal([]byte(caps), &cx) == nil {
			for _, m := range cx.Host.SecModels {
				for _, l := range m.Labels {
					if m.Model == "dac" && l.Type == dom.Type {
						if u, g, ok := parseDACLabel(l.Value); ok {
							return u, g
						}
					}
				}
			}
		}
	}
	if uid, gid, ok := fileOwner(dir); ok {
		return uid, gid
	}
	return -1, -1
}

// parseDACLabel reads "+UID:+GID".
func parseDACLabel(s string) (int, int, bool) {
	u, g, ok := strings.Cut(strings.TrimSpace(s), ":")
	uid, err1 := strconv.Atoi(strings.TrimPrefix(u, "+"))
	gid, err2 := strconv.Atoi(strings.TrimPrefix(g, "+"))
	return uid, gid, ok && err1 == nil && err2 == nil
}

// InstantRunning reports whether the domain runs (or is paused).
func (c *Connector) InstantRunning(ctx context.Context, ref hypervisor.VMRef) (bool, error) {
	lv, err := c.client(ctx)
	if err != nil {
		return false, err
	}
	dom, err := c.lookup(ctx, lv, ref)
	if errors.Is(err, hypervisor.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	st, err := call(ctx, c.cfg.CallTimeout, "domain state", func() (int32, error) {
		st, _, err := lv.DomainGetState(dom, 0)
		return st, err
	})
	if err != nil {
		return false, err
	}
	s := stateName(st)
	return s == "running" || s == "paused", nil
}

// InstantDiscard stops and undefines the domain of an instant recovery
// (by its UUID, so never another one) and removes its overlays.
func (c *Connector) InstantDiscard(ctx context.Context, vm hypervisor.InstantVM) error {
	lv, err := c.client(ctx)
	if err != nil {
		return err
	}
	unlock := c.lockDomain(vm.Ref.ID)
	defer unlock()
	return c.removeInstant(ctx, lv, &journalState{DomainUUID: vm.Ref.ID, DomainName: vm.Ref.Name, Instant: &instantState{Overlays: vm.Overlays}})
}

// removeInstant destroys and undefines an instant recovery's domain and
// removes its overlays.
func (c *Connector) removeInstant(ctx context.Context, lv *golibvirt.Libvirt, j *journalState) error {
	files := map[string]newDisk{}
	for key, p := range j.Instant.Overlays {
		files[key] = newDisk{Path: p}
	}
	return c.removeRestored(ctx, lv, &journalState{DomainUUID: j.DomainUUID, DomainName: j.DomainName, Restore: &restoreState{Disks: files}})
}
