package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FakeMtx is an mtx executable for tests of real (mtx) libraries where
// there is no changer: a shell script that keeps the changer's drives and
// slots in a state file, prints `mtx status` as mtx 1.3 does, moves
// cartridges on load, unload and transfer with mtx's refusals (an empty
// source, a full destination), and logs every command it was given.
// Put Bin first on PATH.
type FakeMtx struct {
	// Bin is the directory holding the mtx script.
	Bin string
	// Changer is a file standing for the changer's device: the script
	// refuses any other, as mtx cannot open a device that is not there.
	Changer string
	state   string
	log     string
}

// NewFakeMtx makes a changer with drives empty drives and a storage slot
// per barcode ("" for an empty slot), then importExport empty
// import/export slots.
func NewFakeMtx(t testing.TB, drives int, slots []string, importExport int) *FakeMtx {
	t.Helper()
	dir := t.TempDir()
	f := &FakeMtx{Bin: filepath.Join(dir, "bin"), Changer: filepath.Join(dir, "sg3"), state: filepath.Join(dir, "changer.state"),
		log: filepath.Join(dir, "mtx.log")}
	var b strings.Builder
	for i := range drives {
		fmt.Fprintf(&b, "D %d Empty 0 -\n", i)
	}
	for i, code := range slots {
		if code == "" {
			fmt.Fprintf(&b, "S %d Empty - -\n", i+1)
		} else {
			fmt.Fprintf(&b, "S %d Full - %s\n", i+1, code)
		}
	}
	for i := range importExport {
		fmt.Fprintf(&b, "S %d Empty IE -\n", len(slots)+i+1)
	}
	script := strings.NewReplacer("@STATE@", f.state, "@LOG@", f.log, "@CHANGER@", f.Changer).Replace(fakeMtxScript)
	for _, w := range []struct {
		path, text string
		mode       os.FileMode
	}{{f.state, b.String(), 0o600}, {f.Changer, "", 0o600}, {f.log, "", 0o600}, {filepath.Join(f.Bin, "mtx"), script, 0o700}} {
		if err := os.MkdirAll(filepath.Dir(w.path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(w.path, []byte(w.text), w.mode); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// Commands are the mtx commands run so far, one per line without the
// -f DEVICE ("status", "load 2 0", ...).
func (f *FakeMtx) Commands(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// The state file has a line per element: "D NUMBER Full|Empty SOURCE TAG"
// for a drive, "S NUMBER Full|Empty IE|- TAG" for a slot ("-" for none).
// Messages and output follow mtx 1.3's.
const fakeMtxScript = `#!/bin/bash
set -u
state=@STATE@
if [ "${1:-}" != -f ] || [ $# -lt 3 ]; then echo "Usage: mtx [ -f <loader-dev> ] <command>" >&2; exit 1; fi
dev=$2; shift 2
if [ "$dev" != @CHANGER@ ]; then echo "mtx: cannot open SCSI device '$dev' - No such file or directory" >&2; exit 1; fi
echo "$*" >> @LOG@
declare -A full tag src ie
drives=(); slots=()
while read -r k n f a t; do
  case $k in
  D) drives+=("$n"); full[D$n]=$f; src[D$n]=$a; tag[D$n]=$t ;;
  S) slots+=("$n"); full[S$n]=$f; ie[S$n]=$a; tag[S$n]=$t ;;
  esac
done < "$state"
save() {
  { for n in "${drives[@]}"; do echo "D $n ${full[D$n]} ${src[D$n]} ${tag[D$n]}"; done
    for n in "${slots[@]}"; do echo "S $n ${full[S$n]} ${ie[S$n]} ${tag[S$n]}"; done; } > "$state.tmp" && mv "$state.tmp" "$state"
}
slot() { [ -n "${full[S$1]+x}" ] || { echo "mtx: Invalid Storage Element $1" >&2; exit 1; }; }
drive() { [ -n "${full[D$1]+x}" ] || { echo "mtx: Invalid Data Transfer Element $1" >&2; exit 1; }; }
case $1 in
status)
  n_ie=0; for n in "${slots[@]}"; do [ "${ie[S$n]}" = IE ] && n_ie=$((n_ie+1)); done
  echo "  Storage Changer $dev:${#drives[@]} Drives, ${#slots[@]} Slots ( $n_ie Import/Export )"
  for n in "${drives[@]}"; do
    if [ "${full[D$n]}" = Full ]; then echo "Data Transfer Element $n:Full (Storage Element ${src[D$n]} Loaded):VolumeTag = ${tag[D$n]}"
    else echo "Data Transfer Element $n:Empty"; fi
  done
  for n in "${slots[@]}"; do
    x=""; [ "${ie[S$n]}" = IE ] && x=" IMPORT/EXPORT"
    if [ "${full[S$n]}" = Full ]; then echo "      Storage Element $n$x:Full :VolumeTag=${tag[S$n]}"
    else echo "      Storage Element $n$x:Empty"; fi
  done ;;
load)
  s=$2; d=${3:-0}; slot "$s"; drive "$d"
  [ "${full[S$s]}" = Full ] || { echo "mtx: source Element Address $((1000+s)) is Empty" >&2; exit 1; }
  [ "${full[D$d]}" = Empty ] || { echo "Drive $d Full (Storage Element ${src[D$d]} loaded)" >&2; exit 1; }
  echo -n "Loading media from Storage Element $s into drive $d..."
  full[D$d]=Full; src[D$d]=$s; tag[D$d]=${tag[S$s]}; full[S$s]=Empty; tag[S$s]=-; save; echo done ;;
unload)
  s=$2; d=${3:-0}; slot "$s"; drive "$d"
  [ "${full[D$d]}" = Full ] || { echo "mtx: Data Transfer Element $d is Empty" >&2; exit 1; }
  [ "${full[S$s]}" = Empty ] || { echo "mtx: Storage Element $s is Full" >&2; exit 1; }
  echo -n "Unloading drive $d into Storage Element $s..."
  full[S$s]=Full; tag[S$s]=${tag[D$d]}; full[D$d]=Empty; tag[D$d]=-; src[D$d]=0; save; echo done ;;
transfer)
  a=$2; b=$3; slot "$a"; slot "$b"
  [ "${full[S$a]}" = Full ] || { echo "mtx: source Element Address $((1000+a)) is Empty" >&2; exit 1; }
  [ "${full[S$b]}" = Empty ] || { echo "mtx: destination Element Address $((1000+b)) is Already Full" >&2; exit 1; }
  full[S$b]=Full; tag[S$b]=${tag[S$a]}; full[S$a]=Empty; tag[S$a]=-; save ;;
inventory) ;;
*) echo "mtx: unknown command $1" >&2; exit 1 ;;
esac
`
