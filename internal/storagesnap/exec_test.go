package storagesnap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// arrayScript is the test's own "array": it keeps snapshots as reflink
// copies (cp --reflink=always) in a directory of its own, and fails or
// hangs half-way through create when the file named FAULT says so.
const arrayScript = `#!/bin/sh
set -eu
snaps=%q
fault=$(cat %q 2>/dev/null || true)
case "$1" in
create)
	mkdir "$snaps/$COFFER_LABEL"
	n=0
	printf '%%s\n' "$COFFER_FILES" | while read -r f; do
		[ -n "$f" ] || continue
		mkdir -p "$snaps/$COFFER_LABEL/$(dirname "$f")"
		cp --reflink=always "$COFFER_DATASTORE/$f" "$snaps/$COFFER_LABEL/$f"
		n=$((n+1))
		if [ "$n" = 1 ] && [ "$fault" = fail ]; then echo "array busy: controller B offline" >&2; exit 3; fi
		if [ "$n" = 1 ] && [ "$fault" = hang ]; then sleep 600; fi
	done
	;;
present) echo "$snaps/$COFFER_LABEL" ;;
changed)
	# The 64 KiB blocks in which the two copies differ, and whatever one
	# has beyond the other's end.
	old="$snaps/$COFFER_BASE_LABEL/$COFFER_FILE"
	new="$snaps/$COFFER_LABEL/$COFFER_FILE"
	{ cmp -l "$old" "$new" 2>/dev/null || true; } |
		awk '{ b = int(($1 - 1) / 65536); if (!(b in seen)) { seen[b] = 1; print b * 65536, 65536 } }'
	a=$(stat -c %%s "$old"); b=$(stat -c %%s "$new")
	if [ "$a" -lt "$b" ]; then echo "$a $((b - a))"; elif [ "$a" -gt "$b" ]; then echo "$b $((a - b))"; fi
	;;
list) ls "$snaps" ;;
delete) rm -rf "$snaps/$COFFER_LABEL" ;;
*) echo "unknown action $1" >&2; exit 2 ;;
esac
`

// array writes the script for a datastore on a reflink filesystem and
// returns the provider and the directory in which it keeps snapshots.
func array(t *testing.T, mnt string) (policy.StorageProvider, string, string) {
	testutil.RequireBinary(t, "cp")
	snaps := filepath.Join(mnt, "array-snaps")
	if err := os.MkdirAll(snaps, 0o755); err != nil {
		t.Fatal(err)
	}
	fault := filepath.Join(t.TempDir(), "fault")
	script := filepath.Join(t.TempDir(), "array.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(arrayScript, snaps, fault)), 0o755); err != nil {
		t.Fatal(err)
	}
	return policy.StorageProvider{Name: "array", Kind: "exec", Connections: []string{"lab"}, Command: []string{script},
		Timeout: policy.Duration(time.Minute)}, snaps, fault
}

func TestExecSnapshotHoldsTheInstant(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	p, snaps, _ := array(t, mnt)
	holdsTheInstant(t, p, filepath.Join(mnt, "vms"))
	if left, _ := os.ReadDir(snaps); len(left) != 0 {
		t.Fatalf("the array still holds %v", left)
	}
}

// A create that fails or hangs half-way: the snapshot (half made) is
// deleted, nothing is journaled any more, and the error says why.
func TestExecCreateFailingOrHangingHalfWay(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	p, snaps, fault := array(t, mnt)
	root := filepath.Join(mnt, "vms")
	disks := datastore(t, root, 0x11)
	for _, tc := range []struct {
		fault, want string
		timeout     time.Duration
	}{
		{"fail", "array busy: controller B offline", time.Minute},
		{"hang", "did not finish in time and was killed", 2 * time.Second},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			if err := os.WriteFile(fault, []byte(tc.fault), 0o644); err != nil {
				t.Fatal(err)
			}
			p.Timeout = policy.Duration(tc.timeout)
			state := t.TempDir()
			_, err := Create(context.Background(), p, root, state, "coffer-"+tc.fault, disks)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: %v, want %q", err, tc.want)
			}
			if left, _ := os.ReadDir(snaps); len(left) != 0 {
				t.Fatalf("the half-made snapshot is still on the array: %v", left)
			}
			if left, _ := os.ReadDir(filepath.Join(state, "storage-snapshots")); len(left) != 0 {
				t.Fatalf("journal left: %v", left)
			}
		})
	}
}

func TestExecKilledAtEveryStepLeavesNothing(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	p, snaps, _ := array(t, mnt)
	killLoop(t, "exec", filepath.Join(mnt, "vms"), []string{"STORAGESNAP_COMMAND=" + p.Command[0]},
		[]string{"journaled#1", "created#1", "deleting#1", "deleted#1"})
	if left, _ := os.ReadDir(snaps); len(left) != 0 {
		t.Fatalf("the array still holds %v", left)
	}
}

func TestExecPresentMustNameADirectory(t *testing.T) {
	script := filepath.Join(t.TempDir(), "bad.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = present ] && echo relative/dir\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	p := policy.StorageProvider{Name: "bad", Kind: "exec", Command: []string{script}}
	ss, err := Create(context.Background(), p, root, t.TempDir(), "coffer-bad", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Delete(context.Background())
	_, err = ss.OpenDisk(context.Background(), hypervisor.VMRef{Name: "web"}, hypervisor.DiskInfo{Path: filepath.Join(root, "d.raw")})
	if err == nil || !strings.Contains(err.Error(), "not an absolute directory") {
		t.Fatalf("open: %v", err)
	}
	if err := Check(context.Background(), policy.StorageProvider{Kind: "exec", Command: []string{"/nonexistent/snap"}}, root); err == nil || !strings.Contains(err.Error(), "/nonexistent/snap") {
		t.Fatalf("check of a missing command: %v", err)
	}
}
