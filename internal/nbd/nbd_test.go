package nbd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// memExport is a sparse in-memory export.
type memExport struct {
	data  []byte
	alloc []Extent
}

func (m *memExport) Size() int64         { return int64(len(m.data)) }
func (m *memExport) Allocated() []Extent { return m.alloc }
func (m *memExport) ReadAt(p []byte, off int64) (int, error) {
	return copy(p, m.data[off:]), nil
}

func newMemExport(t testing.TB, size int64, alloc []Extent) *memExport {
	m := &memExport{data: make([]byte, size), alloc: alloc}
	for _, a := range alloc {
		rand.Read(m.data[a.Offset : a.Offset+a.Length])
	}
	return m
}

func serve(t testing.TB, exports map[string]Export) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "nbd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		Lookup: func(n string) (Export, bool) { e, ok := exports[n]; return e, ok },
		List: func() []string {
			var out []string
			for n := range exports {
				out = append(out, n)
			}
			return out
		},
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return sock
}

var testAlloc = []Extent{{Offset: 0, Length: 1 << 20}, {Offset: 3 << 20, Length: 65536}, {Offset: 7<<20 + 4096, Length: 8192}}

func TestClientAgainstOwnServer(t *testing.T) {
	exp := newMemExport(t, 8<<20, testAlloc)
	sock := serve(t, map[string]Export{"disk": exp})
	ctx := context.Background()
	c, err := Dial(ctx, "unix", sock, ClientOptions{Export: "disk", MetaContexts: []string{ContextAllocation}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Size() != 8<<20 || c.Flags()&FlagReadOnly == 0 {
		t.Fatalf("size %d flags %#x", c.Size(), c.Flags())
	}
	got := make([]byte, c.Size())
	// Dirty the buffer so holes must really be zero-filled by the client.
	for i := range got {
		got[i] = 0xAA
	}
	if _, err := c.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, exp.data) {
		t.Fatal("read differs from export")
	}
	m, err := c.Map(ctx, ContextAllocation)
	if err != nil {
		t.Fatal(err)
	}
	var data []Extent
	for _, e := range m {
		if e.Flags&StateHole == 0 {
			data = append(data, Extent{Offset: e.Offset, Length: e.Length})
		}
	}
	if fmt.Sprint(data) != fmt.Sprint(testAlloc) {
		t.Fatalf("map %v, want %v", data, testAlloc)
	}
	if _, err := Dial(ctx, "unix", sock, ClientOptions{Export: "nope"}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown export: %v", err)
	}
}

func TestOwnServerWithRealClients(t *testing.T) {
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	qemuIO := testutil.RequireBinary(t, "qemu-io")
	nbdinfo := testutil.RequireBinary(t, "nbdinfo")
	exp := newMemExport(t, 8<<20, testAlloc)
	sock := serve(t, map[string]Export{"disk": exp})
	uri := "nbd+unix:///disk?socket=" + sock
	dir := t.TempDir()
	raw := filepath.Join(dir, "out.raw")
	if out, err := exec.Command(qemuImg, "convert", "-f", "raw", "-O", "raw", uri, raw).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(raw)
	if !bytes.Equal(got, exp.data) {
		t.Fatal("qemu-img convert copy differs")
	}
	out, err := exec.Command(nbdinfo, "--json", uri).Output()
	if err != nil {
		t.Fatalf("nbdinfo: %v", err)
	}
	var info struct {
		Exports []struct {
			Size     int64    `json:"export-size"`
			ReadOnly bool     `json:"is_read_only"`
			Contexts []string `json:"contexts"`
		} `json:"exports"`
	}
	if err := json.Unmarshal(out, &info); err != nil || len(info.Exports) != 1 {
		t.Fatalf("nbdinfo output %s: %v", out, err)
	}
	if e := info.Exports[0]; e.Size != 8<<20 || !e.ReadOnly || fmt.Sprint(e.Contexts) != "[base:allocation]" {
		t.Fatalf("nbdinfo: %+v", e)
	}
	out, err = exec.Command(nbdinfo, "--map", "--totals", uri).Output()
	if err != nil {
		t.Fatalf("nbdinfo --map: %v", err)
	}
	wantData := int64(1<<20 + 65536 + 8192)
	if !strings.Contains(string(out), fmt.Sprintf("%d", wantData)) {
		t.Fatalf("nbdinfo --map --totals: want %d data bytes in\n%s", wantData, out)
	}
	// A write must be refused, not crash or corrupt.
	out, err = exec.Command(qemuIO, "-f", "raw", "-c", "write -P 0x55 0 4096", uri).CombinedOutput()
	if err == nil && !strings.Contains(string(out), "ermission") && !strings.Contains(string(out), "read-only") && !strings.Contains(string(out), "Read-only") {
		t.Fatalf("write to read-only export: %s", out)
	}
	out, err = exec.Command(qemuIO, "-r", "-f", "raw", "-c", fmt.Sprintf("read -P 0 %d 65536", 5<<20), uri).CombinedOutput()
	if err != nil || strings.Contains(string(out), "fail") {
		t.Fatalf("qemu-io read of a hole: %v %s", err, out)
	}
}

// TestClientAgainstQemuNBD reads a dirty bitmap and allocation from
// qemu-nbd, the same protocol QEMU's fleecing exports speak.
func TestClientAgainstQemuNBD(t *testing.T) {
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	qemuIO := testutil.RequireBinary(t, "qemu-io")
	qemuNBD := testutil.RequireBinary(t, "qemu-nbd")
	dir := t.TempDir()
	img := filepath.Join(dir, "d.qcow2")
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run(qemuImg, "create", "-q", "-f", "qcow2", img, "64M")
	run(qemuIO, "-f", "qcow2", "-c", "write -P 1 0 1M", img)
	run(qemuImg, "bitmap", "--add", img, "b0")
	run(qemuIO, "-f", "qcow2", "-c", "write -P 2 4M 64k", "-c", "write -P 3 40M 128k", img)
	sock := filepath.Join(dir, "nbd.sock")
	pidFile := filepath.Join(dir, "nbd.pid")
	// --fork returns once the socket accepts connections: no polling.
	run(qemuNBD, "--fork", "--pid-file", pidFile, "-r", "-t", "-e", "4", "-B", "b0", "-x", "disk", "-k", sock, "-f", "qcow2", img)
	defer testutil.KillPIDFile(t, pidFile)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dirty, err := Dial(ctx, "unix", sock, ClientOptions{Export: "disk", MetaContexts: []string{"qemu:dirty-bitmap:b0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer dirty.Close()
	m, err := dirty.Map(ctx, "qemu:dirty-bitmap:b0")
	if err != nil {
		t.Fatal(err)
	}
	var got []Extent
	for _, e := range m {
		if e.Flags&StateDirty != 0 {
			got = append(got, Extent{Offset: e.Offset, Length: e.Length})
		}
	}
	want := []Extent{{Offset: 4 << 20, Length: 65536}, {Offset: 40 << 20, Length: 131072}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("dirty %v want %v", got, want)
	}
	alloc, err := Dial(ctx, "unix", sock, ClientOptions{Export: "disk", MetaContexts: []string{ContextAllocation}})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close()
	am, err := alloc.Map(ctx, ContextAllocation)
	if err != nil {
		t.Fatal(err)
	}
	var dataBytes int64
	for _, e := range am {
		if e.Flags&StateHole == 0 {
			dataBytes += e.Length
		}
	}
	if dataBytes != 1<<20+65536+131072 {
		t.Fatalf("allocated bytes %d (%v)", dataBytes, am)
	}
	buf := make([]byte, 128<<10)
	if _, err := alloc.ReadAt(buf, 40<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{3}, len(buf))) {
		t.Fatal("wrong data at 40M")
	}
	if _, err := alloc.ReadAt(buf, 64<<20-1024); err == nil {
		t.Fatal("read past the end succeeded")
	}
}

func TestServerRejectsMalformedRequests(t *testing.T) {
	exp := newMemExport(t, 1<<20, []Extent{{Offset: 0, Length: 1 << 20}})
	sock := serve(t, map[string]Export{"": exp})
	c, err := Dial(context.Background(), "unix", sock, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4096)
	var ne *Error
	if _, err := c.ReadAt(buf, 1<<20-10); !errors.As(err, &ne) && err == nil {
		t.Fatalf("read across the end: %v", err)
	}
	c.mu.Lock()
	c.size = 1 << 30 // lie to the client so it sends a request beyond the export
	c.mu.Unlock()
	if _, err := c.ReadAt(buf, 512<<20); !errors.As(err, &ne) || ne.Errno != errInval {
		t.Fatalf("out-of-range read: %v", err)
	}
	// The connection survives a rejected request.
	if _, err := c.ReadAt(buf, 0); err != nil {
		t.Fatalf("read after rejected request: %v", err)
	}
}
