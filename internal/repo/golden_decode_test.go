package repo

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/chunk"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// decode reads objects (one version's golden files) with today's code:
// each on its own, then together as a repository opened with the password,
// whose point is listed and whose disk is read back.
func (g *goldenRepo) decode(t *testing.T, objects goldenObjects) {
	ctx := context.Background()
	if want := slices.Concat(g.ids[0][:], g.ids[1][:], g.ids[2][:]); !bytes.Equal(objects["chunk-id"], want) {
		t.Errorf("chunk IDs: today's keyed hash gives %x, the golden file says %x", want, objects["chunk-id"])
	}
	dec, err := chunk.NewDecoder(g.key, MaxChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"chunk-blob", "chunk-blob-b", "chunk-blob-zstd"} {
		plain, err := dec.Decode(nil, objects[name], g.ids[i], len(g.chunks[i]))
		if err != nil || !bytes.Equal(plain, g.chunks[i]) {
			t.Errorf("%s decodes to %q, %v", name, plain, err)
		}
	}
	p := objects["pack"]
	entries, err := pack.ReadTrailer(func(off, n int64) ([]byte, error) { return p[off : off+n], nil }, int64(len(p)), g.key)
	if err != nil || pack.CheckHeader(p) != nil {
		t.Fatalf("pack: %v, header %v", err, pack.CheckHeader(p))
	}
	for _, e := range g.indexEntries() {
		want := pack.Entry{ID: e.ID, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength, Type: pack.TypeChunk}
		if !slices.Contains(entries, want) {
			t.Errorf("pack trailer %+v lacks %+v", entries, want)
		}
	}
	r := g.openAsRepository(t, objects)
	g.checkRepository(ctx, t, r)
}

// openAsRepository stores the objects under their names and opens them.
func (g *goldenRepo) openAsRepository(t *testing.T, objects goldenObjects) *Repository {
	ctx := context.Background()
	st, err := local.Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{
		keysPrefix + g.keyID: "key-file", keysPrefix + g.keyID + keyCopySuffix: "key-file", configName: "config",
		pack.ObjectName(g.pack): "pack", index.ObjectName(g.segment): "index-segment", g.mapName: "diskmap",
		snapshotName(g.point.ID): "manifest",
	}
	for name, object := range names {
		if _, err := store.Put(ctx, st, name, objects[object], store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(ctx, st, g.password, Options{})
	if err != nil {
		t.Fatalf("open the golden repository: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func (g *goldenRepo) checkRepository(ctx context.Context, t *testing.T, r *Repository) {
	if r.Config() != g.config || r.Key().Master() != g.master || len(r.Health()) != 0 {
		t.Errorf("opened as config %+v, health %+v, master key equal: %v", r.Config(), r.Health(), r.Key().Master() == g.master)
	}
	keys, err := r.Keys(ctx)
	if err != nil || len(keys) != 1 || keys[0].ID != g.keyID || !keys[0].Created.Equal(g.config.Created) ||
		keys[0].Host != "golden-host" || keys[0].User != "golden-user" || keys[0].Label != "golden" {
		t.Errorf("keys %+v, %v", keys, err)
	}
	if segs := r.Index().Segments(); len(segs) != 1 || segs[0].Count() != 2 || !slices.Equal(segs[0].Supersedes(), []id.ID{g.retired}) {
		t.Errorf("index segments %+v, want one of 2 chunks superseding %v", segs, g.retired)
	}
	point, err := r.LoadPoint(ctx, g.point.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(point)
	want, _ := json.Marshal(g.point)
	if !bytes.Equal(got, want) || point.HeaderDamaged() != nil {
		t.Errorf("manifest decodes to\n%s\nwant\n%s", got, want)
	}
	m, err := r.OpenDiskMap(ctx, point.Disks[0].Map)
	if err != nil {
		t.Fatal(err)
	}
	spans, err := m.All(ctx)
	if err != nil || !slices.Equal(spans, g.spans) || m.DiskSize() != g.diskSize || m.ChunkSize() != MinChunkSize {
		t.Errorf("disk map: %d bytes in %d-byte spans %v, %v", m.DiskSize(), m.ChunkSize(), spans, err)
	}
	dec, err := r.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // both chunks of the pack, through the index
		plain, err := r.LoadChunk(ctx, g.ids[i], dec, nil)
		if err != nil || !bytes.Equal(plain, g.chunks[i]) {
			t.Errorf("chunk %d reads back as %q, %v", i, plain, err)
		}
	}
}

// canonical is how the golden file name is compared: byte for byte, but
// for the zstd frames an object embeds, which it compares by content.
// zstd libraries may encode the same data differently from one release to
// the next (and cgo builds compress chunks with libzstd, others with
// klauspost/compress): that changes no format, and old frames are decoded
// all the same (the decoding half of TestGolden reads them).
func (g *goldenRepo) canonical(name string) func([]byte) ([]byte, error) {
	switch name {
	case "chunk-blob-zstd":
		return func(b []byte) ([]byte, error) { return canonicalChunk(g.key, b) }
	case "manifest":
		return func(b []byte) ([]byte, error) { return canonicalManifest(g.key, b) }
	case "diskmap":
		return func(b []byte) ([]byte, error) { return canonicalDiskMap(g.key, b) }
	}
	return func(b []byte) ([]byte, error) { return b, nil }
}

var goldenZstd, _ = zstd.NewReader(nil)

// openNonce opens a sealed blob and returns its nonce and plaintext.
func openNonce(key *crypto.Key, sealed []byte, context string) ([]byte, []byte, error) {
	plain, err := key.Open(nil, sealed, context)
	if err != nil || len(sealed) < 12 {
		return nil, nil, fmt.Errorf("open %s: %w", context, err)
	}
	return sealed[:12], plain, nil
}

// canonicalChunk is nonce | method | decompressed payload.
func canonicalChunk(key *crypto.Key, b []byte) ([]byte, error) {
	nonce, plain, err := openNonce(key, b, "chunk")
	if err != nil || len(plain) == 0 {
		return nil, errors.Join(err, errors.New("empty chunk"))
	}
	payload, err := goldenZstd.DecodeAll(plain[1:], nil)
	return slices.Concat(nonce, plain[:1], payload), err
}

// canonicalManifest is header | nonce | JSON.
func canonicalManifest(key *crypto.Key, b []byte) ([]byte, error) {
	if len(b) < snapshotHeaderLen {
		return nil, errors.New("manifest too short")
	}
	nonce, plain, err := openNonce(key, b[snapshotHeaderLen:], snapshotSeal)
	if err != nil {
		return nil, err
	}
	body, err := goldenZstd.DecodeAll(plain, nil)
	return slices.Concat(b[:snapshotHeaderLen], nonce, body), err
}

// canonicalDiskMap is header | per block: nonce, IDs | footer nonce |
// footer with each block's offset and sealed length zeroed (they follow
// from the compressed sizes) | tail. The layout is spelled out here, not
// taken from package diskmap, so that a change there shows.
func canonicalDiskMap(key *crypto.Key, b []byte) ([]byte, error) {
	const header, tail, fixed, row = 16, 8, 24, 16
	if len(b) < header+tail {
		return nil, errors.New("disk map too short")
	}
	flen := int(binary.LittleEndian.Uint32(b[len(b)-tail:]))
	if flen > len(b)-header-tail {
		return nil, errors.New("disk map footer length out of range")
	}
	nonce, f, err := openNonce(key, b[len(b)-tail-flen:len(b)-tail], "map-footer")
	if err != nil || len(f) < fixed {
		return nil, errors.Join(err, errors.New("short disk map footer"))
	}
	blocks := int(binary.LittleEndian.Uint32(f[20:]))
	if len(f) != fixed+blocks*row {
		return nil, fmt.Errorf("disk map footer of %d bytes for %d blocks", len(f), blocks)
	}
	out := slices.Clone(b[:header])
	for i := range blocks {
		r := f[fixed+i*row:]
		off, n := binary.LittleEndian.Uint64(r), binary.LittleEndian.Uint32(r[8:])
		if off+uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("disk map block %d out of range", i)
		}
		bn, comp, err := openNonce(key, b[off:off+uint64(n)], "map-block")
		if err != nil {
			return nil, err
		}
		ids, err := goldenZstd.DecodeAll(comp, nil)
		if err != nil {
			return nil, err
		}
		out = slices.Concat(out, bn, ids)
		clear(r[:12])
	}
	return slices.Concat(out, nonce, f, b[len(b)-tail:]), nil
}
