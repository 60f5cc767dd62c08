package libvirt

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
)

// A shut-off domain has no QEMU for libvirt's backup API, so its disks are
// read as virtnbdbackup's offline mode reads them: each image through a
// read-only qemu-nbd of coffer's own. QEMU's image locking makes that a
// consistent read: while the servers run, a domain started from the
// images fails to start ("Failed to get "write" lock"), so nothing
// writes to them until the session closes.
//
// Change tracking goes on as for a running domain: libvirt 9.0 keeps
// every checkpoint's bitmap active in the qcow2 image (each records all
// writes since its checkpoint), so an incremental exports the base
// checkpoint's bitmap with qemu-nbd, and the new checkpoint is an empty,
// enabled bitmap added with qemu-img before the servers open the images,
// then made known to libvirt by redefining its metadata (libvirt creates
// no checkpoint of an inactive domain). When the domain next runs, QEMU
// loads the bitmap and records into it as into any other.

// offlineState is what the journal records of an offline session: the
// qcow2 images that may hold its new checkpoint's bitmap, which cleanup
// removes from the files when the point was not committed.
type offlineState struct {
	Images []string `json:"images,omitempty"`
}

// offlineDisk is where an offline session reads one disk from.
type offlineDisk struct {
	file string
	srv  *qemu.ImageServer
}

// beginOffline is the snapshot instant of a shut-off domain: the new
// checkpoint's bitmaps added and its metadata defined, then every disk
// opened by a read-only server that holds it until Close.
func (s *session) beginOffline(ctx context.Context) error {
	if err := s.offlineMode(); err != nil {
		return err
	}
	s.j.Offline = &offlineState{}
	s.offline = map[string]*offlineDisk{}
	for i := range s.disks {
		d := &s.disks[i]
		file, err := s.c.diskFile(ctx, s.lv, s.x, d.Key)
		if err != nil {
			return err
		}
		s.offline[d.Key] = &offlineDisk{file: file}
		if d.Format != "qcow2" {
			continue
		}
		s.j.Offline.Images = append(s.j.Offline.Images, file)
		if d.since != "" {
			if why := bitmapUsable(ctx, file, d.since); why != "" {
				d.since, d.changes, d.warning = "", "full", why+"; reading the whole disk"
				s.warnings = append(s.warnings, d.Key+": "+d.warning)
			}
		}
	}
	if err := s.j.save(); err != nil {
		return err
	}
	if s.j.Checkpoint != "" {
		if err := s.defineOfflineCheckpoint(ctx); err != nil {
			return err
		}
	}
	for i := range s.disks {
		d := &s.disks[i]
		srv, err := qemu.ServeImage(ctx, s.offline[d.Key].file, d.Format, d.since, s.c.cfg.Connections*4)
		if err != nil {
			return s.startedMeanwhile(err)
		}
		s.offline[d.Key].srv = srv
	}
	crashPoint("begun")
	return nil
}

// offlineMode is the mode a shut-off domain's point achieves: its disks
// are at rest, as the domain last stopped. After the guest shut itself
// down that is at least what every mode asks; after a destroy or a crash
// it is a power cut's state, crash-consistent, and a required quiesce
// fails.
func (s *session) offlineMode() error {
	mode := s.req.Mode
	if mode == "" {
		mode = hypervisor.CrashConsistent
	}
	if s.shutoff == golibvirt.DomainShutoffShutdown {
		s.achieved = mode
		s.warnings = append(s.warnings, "domain is shut off: its disks were read at rest, as the guest shut down")
		return nil
	}
	why := fmt.Sprintf("domain is shut off (%s), not shut down by its guest: its disks were read at rest as it stopped, crash-consistent", shutoffReason(s.shutoff))
	if mode == hypervisor.Quiesced && s.req.Quiesce == hypervisor.QuiesceRequired {
		return fmt.Errorf("%w: %s", hypervisor.ErrQuiesceFailed, why)
	}
	s.achieved = hypervisor.CrashConsistent
	s.warnings = append(s.warnings, why)
	return nil
}

func shutoffReason(r golibvirt.DomainShutoffReason) string {
	switch r {
	case golibvirt.DomainShutoffDestroyed:
		return "destroyed"
	case golibvirt.DomainShutoffCrashed:
		return "crashed"
	case golibvirt.DomainShutoffFailed:
		return "failed to start"
	case golibvirt.DomainShutoffSaved:
		return "saved"
	}
	return "reason " + strconv.Itoa(int(r))
}

// startedMeanwhile turns a lock that qemu-img or qemu-nbd could not take
// into a transient error: the domain started after coffer saw it shut
// off, and a retry backs it up live.
func (s *session) startedMeanwhile(err error) error {
	if strings.Contains(err.Error(), "lock") {
		return fmt.Errorf("%w: libvirt: domain %s started while coffer prepared its offline read (its images are locked by QEMU); a retry reads it live: %v",
			hypervisor.ErrTransient, s.dom.Name, err)
	}
	return fmt.Errorf("libvirt: offline read of %s: %w", s.dom.Name, err)
}

// defineOfflineCheckpoint adds the new checkpoint's bitmap to every qcow2
// image (qemu-img takes the image's write lock: a running QEMU refuses
// it) and then its metadata to libvirt, with this instant as its
// creation time (chain expiry reads it).
func (s *session) defineOfflineCheckpoint(ctx context.Context) error {
	for _, img := range s.j.Offline.Images {
		if err := qemuImg(ctx, "bitmap", "--add", "--enable", img, s.j.Checkpoint); err != nil {
			return s.startedMeanwhile(err)
		}
	}
	doc := s.checkpointXML()
	var x checkpointXML
	if err := xml.Unmarshal([]byte(doc), &x); err != nil {
		return err
	}
	x.CreationTime = time.Now().Unix()
	out, _ := xml.Marshal(x)
	return do(ctx, s.c.cfg.CallTimeout, "define checkpoint "+s.j.Checkpoint, func() error {
		_, err := s.lv.DomainCheckpointCreateXML(s.dom, string(out), uint32(golibvirt.DomainCheckpointCreateRedefine))
		return err
	})
}

// stopOffline stops the session's servers, which unlocks the images.
func (s *session) stopOffline() {
	for _, d := range s.offline {
		if d.srv != nil {
			d.srv.Stop()
		}
	}
}

// openOffline is OpenDisk of an offline session.
func (s *session) openOffline(ctx context.Context, key string) (hypervisor.DiskReader, error) {
	d := s.offline[key]
	if d == nil || d.srv == nil {
		return nil, fmt.Errorf("%w: disk %s", hypervisor.ErrNotFound, key)
	}
	return d.srv.OpenDisk(ctx, s.c.cfg.Connections)
}

// diskFile is the file or device of a domain's disk, as qemu-nbd opens
// it: a pool volume's path is asked of libvirt; a network disk has none.
func (c *Connector) diskFile(ctx context.Context, lv *golibvirt.Libvirt, x *domainXML, key string) (string, error) {
	for _, dx := range x.Devices.Disks {
		if dx.Target.Dev != key {
			continue
		}
		switch {
		case dx.Source.File != "":
			return dx.Source.File, nil
		case dx.Source.Dev != "":
			return dx.Source.Dev, nil
		case dx.Source.Pool != "":
			return call(ctx, c.cfg.CallTimeout, "path of volume "+dx.path(), func() (string, error) {
				p, err := lv.StoragePoolLookupByName(dx.Source.Pool)
				if err != nil {
					return "", err
				}
				v, err := lv.StorageVolLookupByName(p, dx.Source.Vol)
				if err != nil {
					return "", err
				}
				return lv.StorageVolGetPath(v)
			})
		}
		return "", fmt.Errorf("%w: disk %s of the shut-off domain %s is a %s disk (%s): coffer reads a shut-off domain's disks from their files; start the domain to back it up through libvirt",
			hypervisor.ErrUnsupported, key, x.Name, dx.Type, dx.path())
	}
	return "", fmt.Errorf("%w: disk %s", hypervisor.ErrNotFound, key)
}

// bitmapUsable says why a qcow2 image's bitmap cannot give the changes
// since its checkpoint ("" when it can): missing from the file, or left
// in use by a QEMU that did not close the image (killed), which makes
// it inconsistent.
func bitmapUsable(ctx context.Context, img, name string) string {
	out, err := exec.CommandContext(ctx, "qemu-img", "info", "--force-share", "--output=json", img).Output()
	if err != nil {
		return fmt.Sprintf("the image's bitmaps could not be read (%v)", err)
	}
	var info struct {
		Specific struct {
			Data struct {
				Bitmaps []struct {
					Name  string   `json:"name"`
					Flags []string `json:"flags"`
				} `json:"bitmaps"`
			} `json:"data"`
		} `json:"format-specific"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return fmt.Sprintf("the image's bitmaps could not be read (%v)", err)
	}
	for _, b := range info.Specific.Data.Bitmaps {
		if b.Name != name {
			continue
		}
		for _, f := range b.Flags {
			if f == "in-use" {
				return fmt.Sprintf("bitmap %s is inconsistent (the image was not closed cleanly)", name)
			}
		}
		return ""
	}
	return fmt.Sprintf("bitmap %s is not in the image", name)
}

// qemuImg runs qemu-img and returns its message as the error.
func qemuImg(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "qemu-img", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeBitmaps removes a checkpoint's bitmap from images of a shut-off
// domain; an image without it is not an error.
func removeBitmaps(ctx context.Context, images []string, name string) error {
	var errs []error
	for _, img := range images {
		if why := bitmapUsable(ctx, img, name); strings.HasSuffix(why, "is not in the image") {
			continue
		}
		errs = append(errs, qemuImg(ctx, "bitmap", "--remove", img, name))
	}
	return errors.Join(errs...)
}

// deleteInactive deletes a checkpoint of a shut-off domain as libvirt
// would if it could: its bitmap removed from each image that has it, then
// its metadata. A domain that starts meanwhile (qemu-img cannot take the
// image's lock) has it deleted through libvirt after all.
func (c *Connector) deleteInactive(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, name string) error {
	doc, err := call(ctx, c.cfg.CallTimeout, "describe checkpoint "+name, func() (string, error) {
		cp, err := lv.DomainCheckpointLookupByName(dom, name, 0)
		if err != nil {
			return "", err
		}
		return lv.DomainCheckpointGetXMLDesc(cp, 0)
	})
	if isLibvirtError(err, golibvirt.ErrNoDomainCheckpoint) {
		return nil
	}
	if err != nil {
		return err
	}
	var x checkpointXML
	if err := xml.Unmarshal([]byte(doc), &x); err != nil {
		return fmt.Errorf("libvirt: checkpoint %s: %w", name, err)
	}
	def, err := call(ctx, c.cfg.CallTimeout, "describe domain "+dom.Name, func() (string, error) {
		return lv.DomainGetXMLDesc(dom, golibvirt.DomainXMLInactive)
	})
	if err != nil {
		return err
	}
	dx, err := parseDomain(def)
	if err != nil {
		return err
	}
	var images []string
	for _, d := range x.Disks {
		if d.Checkpoint != "bitmap" {
			continue
		}
		img, err := c.diskFile(ctx, lv, dx, d.Name)
		if errors.Is(err, hypervisor.ErrNotFound) {
			continue // the disk was removed from the domain
		}
		if err != nil {
			return err
		}
		images = append(images, img)
	}
	if err := removeBitmaps(ctx, images, name); err != nil {
		if !strings.Contains(err.Error(), "lock") {
			return err
		}
		return do(ctx, c.cfg.CallTimeout, "delete checkpoint "+name, func() error {
			cp, err := lv.DomainCheckpointLookupByName(dom, name, 0)
			if err != nil {
				return err
			}
			return lv.DomainCheckpointDelete(cp, 0)
		})
	}
	return c.forgetCheckpoint(ctx, lv, dom, name)
}

// removeOfflineBitmaps removes a checkpoint's bitmaps from a shut-off
// domain's images, for an offline session that failed or died between
// adding them and defining the checkpoint; a running domain's QEMU holds
// its images and is left alone.
func (c *Connector) removeOfflineBitmaps(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, images []string, name string) error {
	active, err := call(ctx, c.cfg.CallTimeout, "state of domain "+dom.Name, func() (int32, error) { return lv.DomainIsActive(dom) })
	if err != nil || active != 0 {
		return err
	}
	return removeBitmaps(ctx, images, name)
}
