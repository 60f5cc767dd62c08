package repocmd_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// damageFixture is a repository with three backup points: a1 and a2 of VM
// "a" (a2 changes only a span near the end, so they share most chunks) and
// b1 of VM "b" (no chunk in common with "a"). It knows which objects are
// b1's alone, so that damage to them must be reported against b1 only.
type damageFixture struct {
	e        *clitest.Env
	images   map[string]string // point label -> image it must restore to
	ids      map[string]string // point label -> full ID
	bPacks   []string          // packs written by b1's backup (paths)
	aPacks   []string          // packs written by a1's backup
	bSegment string            // the index segment b1's backup wrote
	bMap     string            // b1's disk map
}

func newDamageFixture(t *testing.T) *damageFixture {
	e := clitest.NewEnv(t)
	f := &damageFixture{e: e, images: map[string]string{}, ids: map[string]string{}}
	e.Must("init", "--pack-size", "1MiB")
	a := e.Image("a.img", 8<<20, 4)
	e.Must("backup", "disk", a, "--name", "a")
	f.aPacks = repoObjects(e, "data")
	f.images["a1"] = copyFile(e, a, "a1.img")
	fh, err := os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fh.WriteAt([]byte("a2 was here"), 7<<20)
	fh.Close()
	e.Must("backup", "disk", a, "--name", "a")
	f.images["a2"] = copyFile(e, a, "a2.img")
	before, segsBefore := repoObjects(e, "data"), repoObjects(e, "index")
	b := e.Image("b.img", 8<<20, 4)
	e.Must("backup", "disk", b, "--name", "b")
	f.images["b1"] = copyFile(e, b, "b1.img")
	f.bPacks = newer(repoObjects(e, "data"), before)
	segs := newer(repoObjects(e, "index"), segsBefore)
	if len(f.bPacks) < 3 || len(segs) != 1 {
		t.Fatalf("b1 wrote %d packs and %d segments", len(f.bPacks), len(segs))
	}
	f.bSegment = segs[0]
	for i, s := range clitest.SnapshotsJSON(t, e) {
		label := []string{"a1", "a2", "b1"}[i]
		f.ids[label] = s.ID
		if label == "b1" {
			f.bMap = filepath.Join(e.Repo, e.Manifest(s.ID).Disks[0].Map)
		}
	}
	return f
}

// repoObjects lists the files under a directory of the repository.
func repoObjects(e *clitest.Env, dir string) []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(e.Repo, dir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func newer(all, before []string) []string {
	var out []string
	for _, p := range all {
		if !slices.Contains(before, p) {
			out = append(out, p)
		}
	}
	return out
}

// region is where in an object a byte is flipped.
type region func(raw []byte) int

var (
	atHeader  region = func([]byte) int { return 3 }
	afterHead region = func([]byte) int { return 16 + 40 }
	atTail    region = func(raw []byte) int { return len(raw) - 3 }
	// inSealedTail is the middle of the sealed part before an 8-byte tail
	// (a pack's trailer, a segment's or disk map's footer).
	inSealedTail region = func(raw []byte) int {
		n := int(binary.LittleEndian.Uint32(raw[len(raw)-8:]))
		return len(raw) - 8 - n/2
	}
	inJSON region = func(raw []byte) int { return len(raw) / 2 }
)

func flip(at region) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		raw[at(raw)] ^= 0x5a
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func truncate(keep float64) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, int64(float64(fi.Size())*keep)); err != nil {
			t.Fatal(err)
		}
	}
}

// formatVersion rewrites the config's format version, as a flipped bit of
// its digit does (1 is 0x31: 0x30 is 0, 0x33 is 3).
func formatVersion(v int) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		changed := bytes.Replace(raw, []byte(`"format_version": 1`), []byte(fmt.Sprintf(`"format_version": %d`, v)), 1)
		if bytes.Equal(changed, raw) {
			t.Fatal("the config has no format_version 1")
		}
		if err := os.WriteFile(path, changed, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(t *testing.T, path string) {
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// damageCase is one damage and what must follow from it.
type damageCase struct {
	name   string
	object func(f *damageFixture) string
	damage func(t *testing.T, path string)
	// lost are the points verify must report as having lost data (and no
	// others); touched are points that may need the repair before they
	// restore although no data is lost (their index entries are damaged).
	lost, touched []string
	repair        []string // the documented repair: the commands verify recommends
	// heal names the point whose image is backed up again after the
	// repair (lost chunks come back from the source, mending every point
	// that uses them); "" for none.
	heal string
	// after says how b1 restores once repaired: "same" (byte-identical),
	// "partial" (ranges recorded lost, exit 6), "recovered" (as a
	// recovered point, the manifest being lost).
	after string
}

func damageCases() []damageCase {
	bPack := func(f *damageFixture) string { return f.bPacks[1] }
	aPack := func(f *damageFixture) string { return f.aPacks[0] }
	seg := func(f *damageFixture) string { return f.bSegment }
	bmap := func(f *damageFixture) string { return f.bMap }
	manifest := func(f *damageFixture) string { return filepath.Join(f.e.Repo, "snapshots", f.ids["b1"]) }
	key := func(f *damageFixture) string {
		for _, p := range repoObjects(f.e, "keys") {
			if !strings.HasSuffix(p, ".copy") {
				return p
			}
		}
		return ""
	}
	config := func(f *damageFixture) string { return filepath.Join(f.e.Repo, "config") }
	packs, index, snaps := []string{"repair packs"}, []string{"repair index"}, []string{"repair snapshots"}
	return []damageCase{
		{name: "pack header", object: bPack, damage: flip(atHeader), repair: packs, after: "same"},
		{name: "pack chunk body", object: bPack, damage: flip(afterHead), lost: []string{"b1"}, repair: packs, heal: "b1", after: "same"},
		{name: "shared pack chunk body", object: aPack, damage: flip(afterHead), lost: []string{"a1", "a2"}, repair: packs, heal: "a2", after: "same"},
		{name: "pack trailer", object: bPack, damage: flip(inSealedTail), repair: packs, after: "same"},
		{name: "pack tail", object: bPack, damage: flip(atTail), repair: packs, after: "same"},
		{name: "pack truncated", object: bPack, damage: truncate(0.6), lost: []string{"b1"}, repair: packs, heal: "b1", after: "same"},
		{name: "pack deleted", object: bPack, damage: remove, lost: []string{"b1"}, repair: index, heal: "b1", after: "same"},
		{name: "index segment header", object: seg, damage: flip(atHeader), repair: index, after: "same"},
		{name: "index segment block", object: seg, damage: flip(afterHead), touched: []string{"b1"}, repair: index, after: "same"},
		{name: "index segment footer", object: seg, damage: flip(inSealedTail), touched: []string{"b1"}, repair: index, after: "same"},
		{name: "index segment tail", object: seg, damage: flip(atTail), touched: []string{"b1"}, repair: index, after: "same"},
		{name: "index segment truncated", object: seg, damage: truncate(0.5), touched: []string{"b1"}, repair: index, after: "same"},
		{name: "index segment deleted", object: seg, damage: remove, touched: []string{"b1"}, repair: index, after: "same"},
		{name: "disk map header", object: bmap, damage: flip(atHeader), repair: snaps, after: "same"},
		{name: "disk map block", object: bmap, damage: flip(afterHead), lost: []string{"b1"}, repair: snaps, after: "partial"},
		{name: "disk map footer", object: bmap, damage: flip(inSealedTail), lost: []string{"b1"}, repair: snaps, after: "partial"},
		{name: "disk map tail", object: bmap, damage: flip(atTail), lost: []string{"b1"}, repair: snaps, after: "partial"},
		{name: "disk map truncated", object: bmap, damage: truncate(0.5), lost: []string{"b1"}, repair: snaps, after: "partial"},
		{name: "disk map deleted", object: bmap, damage: remove, lost: []string{"b1"}, repair: snaps, after: "partial"},
		{name: "manifest header", object: manifest, damage: flip(atHeader), repair: snaps, after: "same"},
		{name: "manifest body", object: manifest, damage: flip(afterHead), touched: []string{"b1"}, repair: snaps, after: "recovered"},
		{name: "manifest truncated", object: manifest, damage: truncate(0.5), touched: []string{"b1"}, repair: snaps, after: "recovered"},
		{name: "manifest deleted", object: manifest, damage: remove, touched: []string{"b1"}, repair: snaps, after: "recovered"},
		{name: "key file", object: key, damage: flip(inJSON), repair: []string{"repair keys"}, after: "same"},
		{name: "key file truncated", object: key, damage: truncate(0.5), repair: []string{"repair keys"}, after: "same"},
		{name: "key file deleted", object: key, damage: remove, repair: []string{"repair keys"}, after: "same"},
		{name: "config", object: config, damage: flip(inJSON), repair: []string{"repair config"}, after: "same"},
		{name: "config truncated", object: config, damage: truncate(0.5), repair: []string{"repair config"}, after: "same"},
		{name: "config deleted", object: config, damage: remove, repair: []string{"repair config"}, after: "same"},
		// A flipped digit of the version is damage, not a newer coffer's
		// repository (the key's authenticated copy says which).
		{name: "config version 0", object: config, damage: formatVersion(0), repair: []string{"repair config"}, after: "same"},
		{name: "config version 3", object: config, damage: formatVersion(3), repair: []string{"repair config"}, after: "same"},
	}
}

// verifyDoc is what the damage tests read of `verify --json`.
type verifyDoc struct {
	Problems []struct {
		Kind     string `json:"kind"`
		DataLoss bool   `json:"data_loss"`
	} `json:"problems"`
	Damaged []struct {
		PointID string `json:"point_id"`
	} `json:"damaged_points"`
	Repairs []string `json:"repairs"`
	Notices []string `json:"notices"`
}

func verifyJSON(e *clitest.Env) (int, verifyDoc) {
	e.T.Helper()
	code, out, errOut := e.Run("verify", "--read-data", "--json")
	var v verifyDoc
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		e.T.Fatalf("verify --json: %v\n%s%s", err, out, errOut)
	}
	return code, v
}

// TestDamageMatrix damages every region of every object type in turn (a
// flipped byte, a cut, a deletion) and checks that verify names exactly the
// points that lost data, that every other point restores byte-identical
// before and after the repair verify recommends, and that after it (and,
// where chunks were lost, a new backup of the source) the repository
// verifies clean.
func TestDamageMatrix(t *testing.T) {
	template := newDamageFixture(t)
	for _, c := range damageCases() {
		t.Run(c.name, func(t *testing.T) {
			f := template.clone(t)
			c.damage(t, c.object(f))
			f.check(c)
		})
	}
}

// clone copies the fixture's repository into a new test environment.
func (f *damageFixture) clone(t *testing.T) *damageFixture {
	e := clitest.NewEnv(t)
	copyTree(e, f.e.Repo, e.Repo)
	g := *f
	g.e = e
	re := func(p string) string { return strings.Replace(p, f.e.Repo, e.Repo, 1) }
	g.bPacks, g.aPacks = mapStrings(f.bPacks, re), mapStrings(f.aPacks, re)
	g.bSegment, g.bMap = re(f.bSegment), re(f.bMap)
	return &g
}

func mapStrings(in []string, fn func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = fn(s)
	}
	return out
}

func (f *damageFixture) check(c damageCase) {
	e, t := f.e, f.e.T
	code, v := verifyJSON(e)
	if code != command.ExitIntegrity && !(code == 0 && len(c.lost) == 0) {
		t.Fatalf("verify: exit %d", code)
	}
	var lost []string
	for _, d := range v.Damaged {
		for label, full := range f.ids {
			if strings.HasPrefix(full, d.PointID) {
				lost = append(lost, label)
			}
		}
	}
	sort.Strings(lost)
	if !slices.Equal(lost, c.lost) {
		t.Fatalf("verify says %v lost data, want %v (problems %+v)", lost, c.lost, v.Problems)
	}
	for _, rp := range c.repair {
		if !slices.Contains(v.Repairs, "coffer "+rp) && !strings.Contains(strings.Join(v.Notices, " "), "coffer "+rp) {
			t.Fatalf("verify does not recommend %q: %v %v", rp, v.Repairs, v.Notices)
		}
	}
	// coffer snapshots shows the points that lost chunks (not those that
	// lost disk map blocks: repair snapshots records those).
	if !strings.HasPrefix(c.name, "disk map") {
		if got := f.damagedInListing(); !slices.Equal(got, c.lost) {
			t.Fatalf("snapshots shows damage on %v, want %v", got, c.lost)
		}
	}
	// Points with neither lost data nor damaged metadata restore now.
	for label := range f.ids {
		if !slices.Contains(c.lost, label) && !slices.Contains(c.touched, label) {
			f.restores(label, "same")
		}
	}
	for _, rp := range c.repair {
		e.Must(strings.Fields(rp)...)
	}
	if c.heal != "" {
		e.Must("backup", "disk", f.images[c.heal], "--name", c.heal[:1])
	}
	if code, out, errOut := e.Run("verify", "--read-data"); code != 0 {
		t.Fatalf("after %v: verify exit %d\n%s%s", c.repair, code, out, errOut)
	}
	if got := f.damagedInListing(); c.after != "partial" && len(got) > 0 {
		t.Fatalf("after the repair, snapshots still shows damage on %v", got)
	}
	for label := range f.ids {
		want := "same"
		if label == "b1" {
			want = c.after
		}
		f.restores(label, want)
	}
}

// damagedInListing returns the labels of the points `coffer snapshots`
// shows as damaged.
func (f *damageFixture) damagedInListing() []string {
	var out []string
	var views []struct {
		ID     string `json:"id"`
		Damage string `json:"damage"`
	}
	if err := json.Unmarshal([]byte(f.e.Must("snapshots", "--json")), &views); err != nil {
		f.e.T.Fatal(err)
	}
	for _, v := range views {
		for label, full := range f.ids {
			if full == v.ID && v.Damage != "" {
				out = append(out, label)
			}
		}
	}
	sort.Strings(out)
	return out
}

// restores checks one point against its image: "same" byte-identical,
// "partial" with lost ranges reported (exit 6), "recovered" as a
// recovered point holding b1's disk.
func (f *damageFixture) restores(label, want string) {
	e, t := f.e, f.e.T
	t.Helper()
	ref := f.ids[label]
	if want == "recovered" {
		ref = ""
		for _, s := range clitest.SnapshotsJSON(t, e) {
			if s.SourceKind == "recovered" {
				ref = s.ID
			}
		}
		if ref == "" {
			t.Fatal("no recovered point")
		}
	}
	out := filepath.Join(e.Dir, "restore-"+label)
	_ = os.Remove(out)
	code, stdout, stderr := e.Run("restore", ref, "--to", out)
	switch want {
	case "partial":
		if code != command.ExitPartial || !strings.Contains(stdout+stderr, "lost") {
			t.Fatalf("restore of %s: exit %d, want %d naming lost ranges\n%s%s", label, code, command.ExitPartial, stdout, stderr)
		}
	default:
		if code != 0 {
			t.Fatalf("restore of %s: exit %d\n%s%s", label, code, stdout, stderr)
		}
		if !clitest.SameFile(t, out, f.images[label]) {
			t.Fatalf("point %s restores different bytes", label)
		}
	}
}

// TestDamageAtRandomOffsets damages random objects at random offsets (a
// flipped byte, a cut, a deletion) and checks the promises that hold
// whatever the damage: no point verify calls intact restores wrong bytes,
// verify's recommended repairs plus new backups of the sources leave a
// repository that verifies clean, and then every point restores. A few
// rounds run in the suite; scripts/soak.sh runs COFFER_SOAK of them.
func TestDamageAtRandomOffsets(t *testing.T) {
	if testing.Short() {
		t.Skip("damage loop")
	}
	template := newDamageFixture(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 3))
	rounds := soakRounds(4)
	for round := range rounds {
		f := template.clone(t)
		var objects []string
		for _, p := range repoObjects(f.e, "") {
			if !strings.HasPrefix(filepath.Base(p), ".") { // the local backend's own lock file
				objects = append(objects, p)
			}
		}
		victim := objects[rng.IntN(len(objects))]
		what := damageAtRandom(t, rng, victim)
		t.Logf("round %d (seed %d): %s %s", round, seed, what, strings.TrimPrefix(victim, f.e.Repo))
		f.checkAnyDamage(what)
	}
}

// damageAtRandom flips a byte (mostly), cuts, or deletes path.
func damageAtRandom(t *testing.T, rng *rand.Rand, path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch n := rng.IntN(10); {
	case n == 0 || len(raw) < 2:
		remove(t, path)
		return "deleted"
	case n == 1:
		cut := rng.IntN(len(raw))
		truncate(float64(cut)/float64(len(raw)))(t, path)
		return fmt.Sprintf("cut to %d of %d bytes", cut, len(raw))
	default:
		at := rng.IntN(len(raw))
		raw[at] ^= byte(1 + rng.IntN(255))
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("byte %d of %d flipped", at, len(raw))
	}
}

func (f *damageFixture) checkAnyDamage(what string) {
	e, t := f.e, f.e.T
	_, v := verifyJSON(e)
	lost := map[string]bool{}
	for _, d := range v.Damaged {
		for label, full := range f.ids {
			if strings.HasPrefix(full, d.PointID) {
				lost[label] = true
			}
		}
	}
	// Before any repair: a point verify calls intact may fail to restore
	// (its index entries may be damaged), but never restores wrong bytes.
	for label, ref := range f.ids {
		if lost[label] {
			continue
		}
		out := filepath.Join(e.Dir, "before-"+label)
		if code, _, _ := e.Run("restore", ref, "--to", out); code == 0 && !clitest.SameFile(t, out, f.images[label]) {
			t.Fatalf("%s: point %s, which verify called intact, restores different bytes", what, label)
		}
		_ = os.Remove(out)
	}
	for _, step := range v.Repairs {
		if strings.HasPrefix(step, "coffer ") {
			e.Must(strings.Fields(step)[1:]...)
		}
	}
	for label := range lost {
		e.Must("backup", "disk", f.images[label], "--name", label[:1])
	}
	if code, out, errOut := e.Run("verify", "--read-data"); code != 0 {
		t.Fatalf("%s: after the repairs %v, verify exit %d\n%s%s", what, v.Repairs, code, out, errOut)
	}
	listed := map[string]bool{}
	for _, s := range clitest.SnapshotsJSON(t, e) {
		listed[s.ID] = true
	}
	for label, ref := range f.ids {
		if !listed[ref] {
			continue // its manifest was lost: it came back as a recovered point
		}
		out := filepath.Join(e.Dir, "after-"+label)
		code, stdout, stderr := e.Run("restore", ref, "--to", out)
		switch {
		case code == command.ExitPartial && lost[label]:
			// Disk map blocks were lost: the rest restored.
		case code != 0:
			t.Fatalf("%s: after the repairs, restore of %s: exit %d\n%s%s", what, label, code, stdout, stderr)
		case !clitest.SameFile(t, out, f.images[label]):
			t.Fatalf("%s: after the repairs, point %s restores different bytes", what, label)
		}
		_ = os.Remove(out)
	}
}
