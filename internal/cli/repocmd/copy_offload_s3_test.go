package repocmd_test

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestCopyOffloadS3ServerSide: between two prefixes of one S3 service with
// one master key, the service copies the packs (CopyObject): the bytes
// that pass between coffer and the server, counted by a proxy in front of
// it, stay under 1% of the packs copied, where the same copy through
// coffer (--no-offload) moves every pack twice. Both copies verify and
// restore byte for byte.
func TestCopyOffloadS3ServerSide(t *testing.T) {
	srv := testutil.StartS3(t)
	proxy := testutil.StartFaultProxy(t, srv.Endpoint, 1)
	e, bucket := newS3Env(t, srv, false, proxy.URL)
	src := e.Repo
	dst := "s3://" + bucket + "/offsite"
	sharedKeyPair(e, src, dst)
	img := e.Image("vm.img", 64<<20, 32)
	e.Must("backup", "disk", img, "--name", "vm")

	b0 := proxy.Bytes()
	res := copyTo(e, t, dst)
	host := proxy.Bytes() - b0
	o := res.Offload
	if o.Method != "server-side" || o.PacksAdopted == 0 || o.PacksPartial != 0 || res.ChunksRead != 0 ||
		o.ChunksAdopted != 32*chunksPerMiB || res.ChunksWritten != o.ChunksAdopted {
		t.Fatalf("copy between two prefixes of one S3 service: %+v", res)
	}
	if host > o.BytesAdopted/100 {
		t.Fatalf("a server-side copy of %d bytes of packs moved %d bytes between coffer and S3 (1%% allowed)", o.BytesAdopted, host)
	}
	if j := e.JobOf("copy"); !clitest.LogHas(j, "copied server-side by the S3 service") {
		t.Errorf("the copy's log does not say the packs were copied server-side: %+v", j.Events)
	}
	restoreAndCompare(t, e, dst, img)

	// The fallback, to another bucket: every pack through coffer.
	other := "s3://" + srv.Bucket(t, false) + "/offsite"
	e.Vars["COFFER_REPO"] = other
	e.Must("init", "--pack-size", "1MiB", "--copy-keys-from", src)
	e.Vars["COFFER_REPO"] = src
	b0 = proxy.Bytes()
	slow := copyTo(e, t, other, "--no-offload")
	fallback := proxy.Bytes() - b0
	if slow.Offload.PacksAdopted != 0 || slow.ChunksRead != 32*chunksPerMiB || fallback < 2*o.BytesAdopted {
		t.Fatalf("--no-offload copy: %+v, %d bytes through coffer", slow, fallback)
	}
	restoreAndCompare(t, e, other, img)
	t.Logf("packs of %d bytes: server-side %d bytes through coffer, fallback %d (%.4fx)", o.BytesAdopted, host, fallback, float64(host)/float64(fallback))
}
