package repo

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/chunk"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/testutil"
)

var updateGolden = flag.Bool("update", false, "record the golden files of a new format version (TestGolden)")

// golden are the committed bytes of every object type of a repository
// (testdata/golden/v<FormatVersion>): upgrades never lose a repository.
func golden() testutil.Golden {
	return testutil.Golden{Dir: "testdata/golden", Version: FormatVersion, Update: *updateGolden,
		Bump: "repo.FormatVersion (internal/repo/config.go)", Cmd: "go test ./internal/repo -run TestGolden"}
}

// goldenRepo is the fixed input of the golden files: a master key, a
// password, chunk data, times and IDs, no randomness. Seals draw their
// nonces from crypto/rand, which each encoding below makes deterministic
// with testing/cryptotest for its own duration: production code keeps its
// random nonces, and no hook in it exists for tests to leave on.
type goldenRepo struct {
	master   crypto.MasterKey
	key      *crypto.Key
	password []byte
	kdf      crypto.KDF
	config   Config
	keyID    string
	chunks   [3][]byte // a and b stored raw in the pack, c compressed
	ids      [3]id.ID
	pack     pack.ID
	segment  id.ID
	retired  id.ID // the segment that segment supersedes
	mapName  string
	diskSize int64
	spans    []id.ID // the disk map: a hole, a lost span, chunk a
	point    *Point
}

func newGoldenRepo(t *testing.T, version int) *goldenRepo {
	g := &goldenRepo{password: []byte("golden password"), keyID: fill(0xa0, 32).String()}
	for i := range 32 {
		g.master.Encryption[i], g.master.ChunkID[i] = byte(i), byte(0x80+i)
	}
	key, err := crypto.NewKey(g.master)
	if err != nil {
		t.Fatal(err)
	}
	g.key = key
	g.kdf = crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: []byte("golden salt 0123")}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	g.config = Config{Magic: configMagic, FormatVersion: version, ID: "00112233445566778899aabbccddeeff", Created: created,
		Encryption: "aes-256-gcm", ChunkSize: MinChunkSize, PackSize: DefaultPackSize, Compression: "zstd",
		CompressionLevel: DefaultCompressionLevel, ConditionalWrites: true}
	g.chunks = [3][]byte{[]byte("coffer golden chunk a\n"), []byte("coffer golden chunk b, never referenced\n"),
		bytes.Repeat([]byte("coffer golden chunk c compresses. "), 20)}
	h := key.NewHasher()
	for i, c := range g.chunks {
		g.ids[i] = h.Sum(c)
	}
	g.pack = pack.MakeID(pack.SessionPrefix{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 7)
	g.segment, g.retired = fill(0xb0, 32), fill(0xc0, 32)
	g.mapName = fmt.Sprintf("maps/%s-%08x", g.pack.Session(), 1)
	g.diskSize = 2*MinChunkSize + int64(len(g.chunks[0]))
	g.spans = []id.ID{id.Zero, LostChunk, g.ids[0]}
	g.point = goldenPoint(g, created)
	return g
}

// goldenPoint fills every field of a manifest.
func goldenPoint(g *goldenRepo, created time.Time) *Point {
	return &Point{ID: fill(0xd0, 32), Version: ManifestVersion, Time: created.Add(time.Hour), Host: "golden-host",
		Source: Source{Kind: "qemu", Connection: "qemu:///system", VMID: "vm-1", VMName: "golden-vm"},
		Tags:   map[string]string{"env": "golden"}, Mode: "incremental", SnapshotMode: "quiesced",
		Parent: fill(0xe0, 32).String(), BaseFull: fill(0xf0, 32).String(), VMConfig: json.RawMessage(`{"memory_mib":512}`),
		Disks: []Disk{{Key: "vda", Name: "golden.qcow2", Kind: "disk", Size: g.diskSize, ChunkSize: MinChunkSize, Map: g.mapName,
			Format: "qcow2", Path: "/var/lib/golden.qcow2", ChangeToken: "token-1", Mode: "incremental", Warning: "a warning",
			BytesRead: 22, BytesZero: MinChunkSize, BytesNew: 22, ChangeCheckSpans: 2, ChangeCheckDiffer: 1, LostSpans: 1}},
		Warnings: []string{"a point warning"}, Protected: true, RetainUntil: created.AddDate(1, 0, 0), JobID: 42,
		Duration: 1.5, BytesRead: 22, BytesNew: 22, BytesStored: 100, ChunksNew: 1, ChunksTotal: 1, BytesLogical: g.diskSize,
		SnapshotModeAchieved: "crash-consistent", Hooks: "ok"}
}

func fill(b byte, n int) id.ID {
	var x id.ID
	for i := range n {
		x[i] = b + byte(i)
	}
	return x
}

// goldenObjects are the objects the fixture encodes to, by golden file name.
type goldenObjects map[string][]byte

// encode writes every object with today's code. Each gets its own
// deterministic random stream, so one object's nonces do not depend on
// how many another drew.
func (g *goldenRepo) encode(t *testing.T) goldenObjects {
	out := goldenObjects{}
	seeded := func(name string, seed uint64, encode func() ([]byte, error)) {
		cryptotest.SetGlobalRandom(t, seed)
		b, err := encode()
		if err != nil {
			t.Fatalf("encode %s: %v", name, err)
		}
		out[name] = b
	}
	out["chunk-id"] = append(append(append([]byte(nil), g.ids[0][:]...), g.ids[1][:]...), g.ids[2][:]...)
	seeded("config", 0, g.config.encode)
	seeded("key-file", 1, g.encodeKeyFile)
	raw, err := chunk.NewEncoder(g.key, 0)
	if err != nil {
		t.Fatal(err)
	}
	seeded("chunk-blob", 2, func() ([]byte, error) { b, _ := raw.Encode(nil, g.chunks[0]); return b, nil })
	seeded("chunk-blob-b", 3, func() ([]byte, error) { b, _ := raw.Encode(nil, g.chunks[1]); return b, nil })
	seeded("chunk-blob-zstd", 4, func() ([]byte, error) { return g.encodeCompressed(t) })
	seeded("pack", 5, func() ([]byte, error) { return g.encodePack(out["chunk-blob"], out["chunk-blob-b"]) })
	seeded("index-segment", 6, g.encodeSegment)
	seeded("diskmap", 7, g.encodeDiskMap)
	seeded("manifest", 8, func() ([]byte, error) { return (&Repository{key: g.key}).encodeSnapshot(g.point) })
	return out
}

func (g *goldenRepo) encodeKeyFile() ([]byte, error) {
	cfg := g.config
	kf, err := newKeyFile(keyPayload{Master: g.master, Repository: cfg.ID, Encryption: cfg.Encryption, Config: &cfg}, g.password, "golden", g.kdf)
	if err != nil {
		return nil, err
	}
	kf.Created, kf.Host, kf.User, kf.ID = g.config.Created, "golden-host", "golden-user", g.keyID
	return kf.encode()
}

func (g *goldenRepo) encodeCompressed(t *testing.T) ([]byte, error) {
	enc, err := chunk.NewEncoder(g.key, DefaultCompressionLevel)
	if err != nil {
		return nil, err
	}
	b, compressed := enc.Encode(nil, g.chunks[2])
	if !compressed {
		t.Fatal("chunk c was stored raw: it must exercise the zstd method")
	}
	return b, nil
}

func (g *goldenRepo) encodePack(blobs ...[]byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := pack.NewWriter(&buf, g.key)
	if err != nil {
		return nil, err
	}
	for i, b := range blobs {
		if _, err := w.Add(g.ids[i], b, len(g.chunks[i])); err != nil {
			return nil, err
		}
	}
	err = w.Finish()
	return buf.Bytes(), err
}

// encodeSegment indexes the pack: its entries as pack.ReadTrailer gives them.
func (g *goldenRepo) encodeSegment() ([]byte, error) {
	var buf bytes.Buffer
	w, err := index.NewSegmentWriter(&buf, g.key, 2, []id.ID{g.retired})
	if err != nil {
		return nil, err
	}
	for _, e := range g.indexEntries() {
		if err := w.Add(e); err != nil {
			return nil, err
		}
	}
	err = w.Finish()
	return buf.Bytes(), err
}

// indexEntries are the pack's blobs in chunk ID order.
func (g *goldenRepo) indexEntries() []index.Entry {
	overhead := uint32(g.key.Overhead() + 1) // the seal and the method byte
	a := index.Entry{ID: g.ids[0], Location: index.Location{Pack: g.pack, Offset: pack.HeaderSize,
		Length: uint32(len(g.chunks[0])) + overhead, RawLength: uint32(len(g.chunks[0]))}}
	b := index.Entry{ID: g.ids[1], Location: index.Location{Pack: g.pack, Offset: a.Offset + a.Length,
		Length: uint32(len(g.chunks[1])) + overhead, RawLength: uint32(len(g.chunks[1]))}}
	if b.ID.Less(a.ID) {
		return []index.Entry{b, a}
	}
	return []index.Entry{a, b}
}

func (g *goldenRepo) encodeDiskMap() ([]byte, error) {
	var buf bytes.Buffer
	w, err := diskmap.NewWriter(&buf, g.key, g.diskSize, MinChunkSize)
	if err != nil {
		return nil, err
	}
	for _, x := range g.spans {
		if err := w.Add(x); err != nil {
			return nil, err
		}
	}
	err = w.Finish()
	return buf.Bytes(), err
}

// TestGolden encodes every object type of a repository from fixed inputs
// and compares the bytes with those committed for this format version;
// then it reads the committed bytes of every version with today's code,
// as a repository, and checks what they hold. See "Golden bytes" in
// docs/design/repository-format.md.
func TestGolden(t *testing.T) {
	gf := golden()
	g := newGoldenRepo(t, FormatVersion)
	objects := g.encode(t)
	for _, name := range goldenNames {
		gf.CheckAs(t, name, objects[name], g.canonical(name))
	}
	for _, v := range gf.Versions(t) {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			old := goldenObjects{}
			for _, name := range goldenNames {
				old[name] = gf.Read(t, v, name)
			}
			newGoldenRepo(t, v).decode(t, old)
		})
	}
}

var goldenNames = []string{"config", "key-file", "chunk-id", "chunk-blob", "chunk-blob-b", "chunk-blob-zstd", "pack", "index-segment", "diskmap", "manifest"}
