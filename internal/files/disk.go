package files

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/diskfs/go-diskfs/partition"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
)

// ErrUnsupported reports a volume no reader understands.
var ErrUnsupported = errors.New("unsupported or unrecognised filesystem")

// Volume is one place a filesystem may live: a partition, a whole
// unpartitioned disk, or an LVM logical volume.
type Volume struct {
	Name  string `json:"name"` // "0" (bare disk), "1", "2", ..., "lvm:VG-LV"
	Start int64  `json:"start"`
	Size  int64  `json:"size"`
	Type  string `json:"type"` // ext4, xfs, vfat, ntfs, lvm2-pv, unknown
	Note  string `json:"note,omitempty"`

	r io.ReaderAt // the volume's bytes, offset 0 = volume start
}

// Disk is a disk image opened for file access.
type Disk struct {
	r        io.ReaderAt
	size     int64
	volumes  []Volume
	warnings warnings
}

// Open reads the partition table (if any) and identifies every volume.
// Errors of r surface as ImageReadError.
func Open(r io.ReaderAt, size int64) (d *Disk, err error) {
	defer guard("partition table", &err)
	r = imageReader{r}
	d = &Disk{r: r, size: size}
	st := &readerStorage{r: r, size: size}
	table, terr := partition.Read(st, 512, 512)
	if terr != nil {
		// No table: maybe a bare filesystem.
		d.add(Volume{Name: "0", Start: 0, Size: size})
	} else {
		for _, p := range table.GetPartitions() {
			start, length := p.GetStart(), p.GetSize()
			if length <= 0 || start < 0 || start+length > size || unused(p) {
				continue
			}
			d.add(Volume{Name: strconv.Itoa(p.GetIndex()), Start: start, Size: length})
		}
	}
	for _, v := range append([]Volume(nil), d.volumes...) {
		if v.Type != TypeLVM {
			continue
		}
		lvs, err := lvmVolumes(v)
		if err != nil {
			d.note(v.Name, "LVM metadata unreadable: "+err.Error())
			continue
		}
		for _, lv := range lvs {
			d.add(lv)
		}
	}
	return d, nil
}

func unused(p any) bool {
	switch t := p.(type) {
	case *gpt.Partition:
		return t.Type == gpt.Unused
	case *mbr.Partition:
		return t.Type == mbr.Empty
	}
	return false
}

func (d *Disk) add(v Volume) {
	if v.r == nil {
		v.r = io.NewSectionReader(d.r, v.Start, v.Size)
	}
	if v.Type == "" {
		v.Type = probe(v.r, v.Size)
	}
	d.volumes = append(d.volumes, v)
}

func (d *Disk) note(name, note string) {
	for i := range d.volumes {
		if d.volumes[i].Name == name {
			d.volumes[i].Note = note
		}
	}
}

// Warnings lists what the filesystem readers warned about so far, each
// distinct message once with its count.
func (d *Disk) Warnings() []Warning { return d.warnings.list() }

// Volumes lists the volumes found.
func (d *Disk) Volumes() []Volume { return d.volumes }

// Volume finds a volume by name.
func (d *Disk) Volume(name string) (Volume, error) {
	for _, v := range d.volumes {
		if v.Name == name {
			return v, nil
		}
	}
	var names []string
	for _, v := range d.volumes {
		names = append(names, v.Name)
	}
	sort.Strings(names)
	return Volume{}, fmt.Errorf("no volume %q on this disk (volumes: %s)", name, strings.Join(names, ", "))
}

// FS opens the filesystem of a volume.
func (d *Disk) FS(v Volume) (FS, error) {
	var (
		fsys FS
		err  error
	)
	switch v.Type {
	case TypeExt4, TypeFAT:
		fsys, err = openDiskfs(v)
	case TypeXFS:
		fsys, err = openXFS(v, d.warnings.add)
	case TypeNTFS:
		fsys, err = openNTFS(v)
	default:
		return nil, fmt.Errorf("volume %s: %w (no ext4/XFS/FAT/NTFS signature)", v.Name, ErrUnsupported)
	}
	if err != nil {
		return nil, fmt.Errorf("volume %s (%s): damaged or unreadable filesystem: %w", v.Name, v.Type, err)
	}
	return guarded{fsys: fsys, what: "volume " + v.Name}, nil
}

// Root returns the file tree of the disk: the only filesystem's tree when
// there is exactly one, else a root with one directory per readable volume.
func (d *Disk) Root() (FS, error) {
	var readable []Volume
	for _, v := range d.volumes {
		switch v.Type {
		case TypeExt4, TypeXFS, TypeFAT, TypeNTFS:
			readable = append(readable, v)
		}
	}
	switch len(readable) {
	case 0:
		var types []string
		for _, v := range d.volumes {
			types = append(types, v.Name+"="+v.Type)
		}
		return nil, fmt.Errorf("%w: no readable filesystem on this disk (volumes: %s)", ErrUnsupported, strings.Join(types, ", "))
	case 1:
		return d.FS(readable[0])
	}
	return &multiFS{d: d, vols: readable, open: map[string]FS{}}, nil
}
