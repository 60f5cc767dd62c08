package workercmd_test

import (
	"testing"
	"time"

	"github.com/coffer-backup/coffer/bench/fleetadopt"
)

// TestRetryStoresOnlyTheRest: a worker killed (SIGKILL) half-way through
// a VM's first backup is declared lost; the leader ends its repository
// session, whose lease (another host's, alive for 10 more minutes) would
// otherwise keep its packs unindexed, and re-admits the attempt on the
// other worker, which stores only what the lost attempt had not: no chunk
// of the lost attempt's packs is in the retry's. The repository verifies
// (with its data) before and after gc. On local disk and on S3.
func TestRetryStoresOnlyTheRest(t *testing.T) {
	for _, backend := range []struct {
		name string
		s3   bool
	}{{"local", false}, {"s3", true}} {
		t.Run(backend.name, func(t *testing.T) {
			r := fleetadopt.Run(t, fleetadopt.Options{S3: backend.s3, KillAt: 0.5, DiskSize: "32MiB", ReadDelay: 20 * time.Millisecond})
			t.Logf("%s killed after storing %d bytes (%d in packs) of %d; the retry on %s stored %d (%d in packs), %d of them again (%.1f%%)",
				r.Worker, r.LostRaw, r.LostStored, r.Disk, r.RetryWorker, r.RetryRaw, r.RetryStored, r.AgainRaw, 100*r.Ratio())
			t.Logf("leader: %s", r.Adopted)
			// The kill came part-way: the lost attempt stored some of the
			// disk, not all of it (else the test proves nothing).
			if r.LostRaw == 0 || r.LostRaw >= r.Disk {
				t.Fatalf("the lost attempt stored %d bytes of a disk of %d", r.LostRaw, r.Disk)
			}
			// The retry stored at most what the lost attempt had not.
			if r.RetryRaw > r.Disk-r.LostRaw || r.AgainRaw != 0 {
				t.Fatalf("the retry stored %d bytes, more than the disk's %d less the lost attempt's %d (%d stored again)",
					r.RetryRaw, r.Disk, r.LostRaw, r.AgainRaw)
			}
		})
	}
}
