package ranged

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// A restore to a new VM keeps a journal under the state directory, one
// directory per VM being restored (restores/<VM MoRef>/): restore.json
// says which point goes into which VM, and disk-<key>.json the pieces of
// each disk already written. Each file is replaced atomically
// (statefile), and a disk's record holds runs of Piece numbers, not a
// list of pieces, so it stays a few lines long however large the disk:
// committing progress rewrites only that disk's few lines.

// Record is the restore a VM's journal belongs to.
type Record struct {
	VM        string    `json:"vm"` // MoRef value
	Name      string    `json:"name"`
	Point     string    `json:"point"`
	Datastore string    `json:"datastore"`
	Created   time.Time `json:"created"`
}

func RecordsDir(stateDir string) string { return filepath.Join(stateDir, "restores") }

func Dir(stateDir, vm string) string { return filepath.Join(RecordsDir(stateDir), vm) }

func (r Record) Save(stateDir string) error {
	if err := statefile.WriteJSON(filepath.Join(Dir(stateDir, r.VM), "restore.json"), r); err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	return nil
}

// Find is the journalled restore of point into a VM called name.
func Find(stateDir, name, point string) (Record, error) {
	dirs, err := filepath.Glob(filepath.Join(RecordsDir(stateDir), "*", "restore.json"))
	if err != nil {
		return Record{}, err
	}
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r Record
		if json.Unmarshal(b, &r) == nil && r.Name == name && r.Point == point {
			return r, nil
		}
	}
	return Record{}, fmt.Errorf("no broken restore of point %s into a VM named %q to resume (restore it again without --resume)", point, name)
}

// Forget removes a VM's restore journal: the restore completed,
// or the VM it wrote into is gone.
func Forget(stateDir, vm string) error {
	if err := os.RemoveAll(Dir(stateDir, vm)); err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	if err := statefile.SyncDir(RecordsDir(stateDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("restore journal: %w", err)
	}
	return nil
}

// Progress is one disk's journalled progress.
type Progress struct {
	path  string
	Disk  string `json:"disk"`
	Size  int64  `json:"size"`
	Plan  string `json:"plan"` // fingerprint of the pieces: progress of another plan means nothing
	Count int    `json:"pieces"`
	// Done are runs [from, to) of the Piece numbers written and flushed.
	Runs [][2]int `json:"done"`
}

// planID fingerprints a disk's pieces.
func planID(pieces []Piece) string {
	h := sha256.New()
	var b [17]byte
	for _, p := range pieces {
		binary.LittleEndian.PutUint64(b[:8], uint64(p.Off))
		binary.LittleEndian.PutUint64(b[8:16], uint64(p.Len))
		b[16] = 0
		if p.Zero {
			b[16] = 1
		}
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// OpenProgress loads a disk's progress from dir, or starts it when there
// is none; progress recorded for other pieces (another point, another
// Piece size) is refused rather than trusted.
func OpenProgress(dir, disk string, size int64, pieces []Piece) (*Progress, error) {
	p := &Progress{path: filepath.Join(dir, "disk-"+safeName(disk)+".json"), Disk: disk, Size: size,
		Plan: planID(pieces), Count: len(pieces)}
	b, err := os.ReadFile(p.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return p, nil
	case err != nil:
		return nil, fmt.Errorf("restore journal: %w", err)
	}
	var old Progress
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, fmt.Errorf("restore journal %s: %w", p.path, err)
	}
	if old.Plan != p.Plan || old.Size != size || old.Disk != disk {
		return nil, fmt.Errorf("restore journal %s was written for other data than this disk's: restore again without --resume", p.path)
	}
	p.Runs = old.Runs
	return p, nil
}

// safeName keeps a device key usable as a file name.
func safeName(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			out[i] = '_'
		}
	}
	return string(out)
}

// done reports whether Piece i is journalled.
func (p *Progress) Done(i int) bool {
	k := sort.Search(len(p.Runs), func(k int) bool { return p.Runs[k][1] > i })
	return k < len(p.Runs) && p.Runs[k][0] <= i
}

// Record adds pieces to the runs and stores the record.
func (p *Progress) Record(pieces []int) error {
	for _, i := range pieces {
		p.add(i)
	}
	if err := statefile.WriteJSON(p.path, p); err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	return nil
}

// add puts Piece i into the runs, merging neighbours.
func (p *Progress) add(i int) {
	if p.Done(i) {
		return
	}
	k := sort.Search(len(p.Runs), func(k int) bool { return p.Runs[k][0] > i })
	p.Runs = slices.Insert(p.Runs, k, [2]int{i, i + 1})
	if k+1 < len(p.Runs) && p.Runs[k+1][0] == i+1 { // joins the next run
		p.Runs[k][1] = p.Runs[k+1][1]
		p.Runs = slices.Delete(p.Runs, k+1, k+2)
	}
	if k > 0 && p.Runs[k-1][1] == i { // joins the previous run
		p.Runs[k-1][1] = p.Runs[k][1]
		p.Runs = slices.Delete(p.Runs, k, k+1)
	}
}
