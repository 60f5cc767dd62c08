package console

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/console/format"

	"github.com/coffer-backup/coffer/internal/console/restorewizard"
)

// Sequential media in the console: the libraries of the configuration
// with their drives and slots (media-library-status), the volumes of the
// media catalogue by pool with their protection and WORM
// (list-media-volumes), a volume's contents (media-contents); and the
// actions that start tasks: copy points of a repository to a pool
// (media-copy), restore a point from tape (media-restore), verify a
// volume (media-verify). The browser follows each task's live page.

type mediaView struct {
	Libraries []mediaLibraryView
	Pools     []mediaPoolView
	// PoolNames and Repos fill the copy form's choices.
	PoolNames []string
	Repos     []string
	// Config is the libraries of the configuration, edited
	// (page_config.go); Problems what could not be read of it.
	Config   []configSection
	Problems []string
}

// mediaLibraryKinds are the libraries of the configuration, edited on
// the Media page as page_config.go edits every kind.
var mediaLibraryKinds = []configKind{
	{"media-library", "media-libraries", "Libraries of the configuration",
		"A tape library, as an entry of the file's media-libraries section: kind vtl with the directory of a virtual tape library (made with coffer media vtl create), or kind mtx with its changer device and drives. One added here is listed above with its drives and slots.",
		"name: tapes\nkind: vtl\ndirectory: /srv/vtl\n", "/ui/media"},
}

type mediaLibraryView struct {
	// Directory is a virtual tape library's; Changer a real library's
	// changer device.
	Name, Directory, Changer string
	// DriveLimit is the library's drive-limit (0: every drive at once).
	DriveLimit int
	Status     *api.MediaLibraryStatus
	// Error says why the status could not be read (a task holds the
	// library, its directory is gone).
	Error string
	// Cartridges counts the cartridges in the slots and drives; Empty, the
	// empty slots.
	Cartridges, Empty int
}

type mediaPoolView struct {
	Name    string
	Volumes []mediaVolumeView
}

type mediaVolumeView struct {
	api.MediaVolume
	// Protection says until when, and why, the volume is kept from being
	// overwritten; Expired, that it may be relabelled.
	Protection string
	Expired    bool
}

// volumeProtection says how a volume is protected from overwriting.
func volumeProtection(v api.MediaVolume, now time.Time) mediaVolumeView {
	out := mediaVolumeView{MediaVolume: v}
	switch {
	case v.WORM:
		out.Protection = "never overwritten (WORM)"
	case v.ProtectedUntil.IsZero():
		out.Protection, out.Expired = "no retention: may be relabelled", true
	case v.ProtectedUntil.After(now):
		out.Protection = "until " + format.When(v.ProtectedUntil) + " (" + format.Duration(v.ProtectedUntil.Sub(now).Seconds()) + " left)"
	default:
		out.Protection, out.Expired = "expired "+format.Ago(v.ProtectedUntil)+": may be relabelled", true
	}
	return out
}

// mediaPage shows the libraries and the volumes by pool.
func (p *page) mediaPage() {
	var libs []api.ConfigObject
	if _, err := p.api.call("list-media-libraries", nil, nil, nil, &libs); err != nil {
		p.fail(err)
		return
	}
	v := mediaView{Repos: p.c.cfg.Repositories(p.r.Context())}
	if len(v.Repos) == 0 {
		v.Repos = []string{"default"}
	}
	for _, o := range libs {
		if o.Overridden {
			continue
		}
		l := mediaLibraryView{Name: o.Name}
		l.Directory, _ = o.Spec["directory"].(string)
		l.Changer, _ = o.Spec["changer"].(string)
		if n, ok := o.Spec["drive-limit"].(float64); ok {
			l.DriveLimit = int(n)
		}
		var st api.MediaLibraryStatus
		if _, err := p.api.call("media-library-status", map[string]string{"library": o.Name}, nil, nil, &st); err != nil {
			if ae, ok := err.(*apiError); ok && ae.Status == 401 {
				p.fail(err)
				return
			}
			l.Error = err.Error()
		} else {
			l.Status = &st
			for _, s := range st.Slots {
				if s.Full {
					l.Cartridges++
				} else {
					l.Empty++
				}
			}
			for _, d := range st.Drives {
				if d.Full {
					l.Cartridges++
				}
			}
		}
		v.Libraries = append(v.Libraries, l)
	}
	var vols []api.MediaVolume
	if _, err := p.api.call("list-media-volumes", nil, nil, nil, &vols); err != nil {
		p.fail(err)
		return
	}
	now := time.Now()
	pools := map[string]*mediaPoolView{}
	for _, vol := range vols {
		pv := pools[vol.Pool]
		if pv == nil {
			pv = &mediaPoolView{Name: vol.Pool}
			pools[vol.Pool] = pv
			v.PoolNames = append(v.PoolNames, vol.Pool)
		}
		pv.Volumes = append(pv.Volumes, volumeProtection(vol, now))
	}
	slices.Sort(v.PoolNames)
	for _, name := range v.PoolNames {
		v.Pools = append(v.Pools, *pools[name])
	}
	var ok bool
	if v.Config, ok = p.configSections(mediaLibraryKinds, &v.Problems); ok {
		p.show("media", "Media", "media", v)
	}
}

type mediaVolumeDetail struct {
	Volume mediaVolumeView
	Points []mediaPointView
	// Restorable: the volume's library is one of the configuration, which
	// the API restores from (a library the command line named by its
	// directory is not).
	Restorable bool
	BlockSize  string
}

// mediaPointView is a backup point's part of a volume: its segments
// there, and whether its stream goes on on another volume.
type mediaPointView struct {
	ID, Short, VM, Repository string
	Blocks, DataBytes         int64
	Ends                      bool
	DefaultTo                 string
}

// mediaVolume shows a volume and the backup points on it, each with the
// form that restores it from tape.
func (p *page) mediaVolume() {
	barcode := p.r.PathValue("barcode")
	var vols []api.MediaVolume
	if _, err := p.api.call("list-media-volumes", nil, nil, nil, &vols); err != nil {
		p.fail(err)
		return
	}
	i := slices.IndexFunc(vols, func(v api.MediaVolume) bool { return v.Barcode == barcode })
	if i < 0 {
		p.fail(&apiError{Status: 404, Class: api.NotFound, Detail: "no volume " + barcode + " in the media catalogue you may see"})
		return
	}
	var segs []api.MediaSegment
	if _, err := p.api.call("media-contents", nil, url.Values{"barcode": {barcode}}, nil, &segs); err != nil {
		p.fail(err)
		return
	}
	var libs []api.ConfigObject
	if _, err := p.api.call("list-media-libraries", nil, nil, nil, &libs); err != nil {
		p.fail(err)
		return
	}
	v := mediaVolumeDetail{Volume: volumeProtection(vols[i], time.Now()), BlockSize: config.HumanBytes(int64(vols[i].BlockSizeBytes))}
	v.Restorable = slices.ContainsFunc(libs, func(o api.ConfigObject) bool { return o.Name == v.Volume.Library && !o.Overridden })
	byPoint := map[string]int{}
	for _, s := range segs {
		j, ok := byPoint[s.PointID]
		if !ok {
			j = len(v.Points)
			byPoint[s.PointID] = j
			short := s.PointID[:min(8, len(s.PointID))]
			v.Points = append(v.Points, mediaPointView{ID: s.PointID, Short: short, VM: s.VM, Repository: s.Repository,
				DefaultTo: restorewizard.SafeFile(s.VM) + "-" + short + "-from-tape.img"})
		}
		pt := &v.Points[j]
		pt.Blocks += s.LastBlock - s.FirstBlock + 1
		pt.DataBytes += s.DataBytes
		pt.Ends = pt.Ends || s.End
	}
	p.show("mediavolume", "Volume "+barcode, "media", v)
}

// mediaCopy copies points of a repository to a pool of the library, as a
// task whose page the browser follows.
func (p *page) mediaCopy() {
	f := p.form()
	body := api.MediaCopyRequest{Pool: strings.TrimSpace(f.Get("pool")), Points: strings.Fields(f.Get("points")), Latest: f.Get("latest") == "1"}
	if body.Pool == "" {
		p.refuse("name the media pool to copy to")
		return
	}
	if days := strings.TrimSpace(f.Get("retention_days")); days != "" {
		d, err := strconv.ParseFloat(days, 64)
		if err != nil || d < 0 {
			p.refuse("the retention is a number of days, 0 or more")
			return
		}
		body.RetentionSeconds = d * 86400
	}
	if n := strings.TrimSpace(f.Get("drives")); n != "" {
		d, err := strconv.Atoi(n)
		if err != nil || d < 1 {
			p.refuse("the drives written at once are a whole number, 1 or more")
			return
		}
		body.Drives = d
	}
	repo := f.Get("repo")
	if repo == "" {
		repo = p.repo()
	}
	q := url.Values{"library": {p.r.PathValue("library")}}
	id, err := p.startTask("media-copy", map[string]string{"repo": repo}, q, body, nil)
	p.started(id, err, "The points are copied.")
}

// mediaRestore restores a point's disks from tape into the server's
// restore directory, as a task.
func (p *page) mediaRestore() {
	f := p.form()
	body := api.MediaRestoreRequest{Disk: strings.TrimSpace(f.Get("disk")), To: strings.TrimSpace(f.Get("to")), Overwrite: f.Get("overwrite") == "1"}
	point := f.Get("point")
	if point == "" {
		p.refuse("choose the point to restore")
		return
	}
	params := map[string]string{"library": p.r.PathValue("library"), "point": point}
	id, err := p.startTask("media-restore", params, nil, body, nil)
	p.started(id, err, "The point is restored.")
}

// mediaVerify reads a volume back, as a task.
func (p *page) mediaVerify() {
	params := map[string]string{"library": p.r.PathValue("library"), "barcode": p.r.PathValue("barcode")}
	id, err := p.startTask("media-verify", params, nil, nil, nil)
	p.started(id, err, "The volume verifies.")
}
