package measure

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/procs"
	"github.com/coffer-backup/coffer/internal/repo"
)

// PipelineOptions say what to measure of coffer's pipeline.
type PipelineOptions struct {
	// Levels are the zstd levels to measure (0: no compression; default
	// 0, 1, 3 and 9).
	Levels []int
	// Bytes is the data each level processes (default 512 MiB).
	Bytes int64
	// Workers is the goroutines hashing and sealing (default
	// GOMAXPROCS, as a backup uses).
	Workers int
}

// PipelineResult is the pipeline's throughput at one level.
type PipelineResult struct {
	Level   int
	Workers int
	// Rate is bytes/s of input through all workers; PerCore divides it
	// by the cores they had.
	Rate, PerCore float64
	// StoredRatio is sealed bytes per input byte on the test data.
	StoredRatio float64
}

// chunkSize is the repository's default chunk size.
const chunkSize = 1 << 20

// maxWorkersPerCore bounds the goroutines of a measurement by the host's
// cores: each holds a zstd encoder, about 19 MB at level 19, so the 1,024
// the API's schema allows would take 19 GB of a small server; and beyond
// a few per core a measurement measures only contention.
const maxWorkersPerCore = 4

// Checked returns the options with their defaults filled in, or why they
// cannot be measured: a face that runs the measurement after its answer
// refuses them before it answers.
func (o PipelineOptions) Checked() (PipelineOptions, error) {
	if o.Levels == nil {
		o.Levels = []int{0, 1, 3, 9}
	}
	if o.Bytes == 0 {
		o.Bytes = 512 << 20
	}
	if o.Workers == 0 {
		o.Workers = procs.Working()
	}
	if o.Workers < 1 || o.Workers > 1024 {
		return o, fmt.Errorf("measure: %d workers: give 1 to 1024", o.Workers)
	}
	if most := maxWorkersPerCore * runtime.NumCPU(); o.Workers > most {
		return o, fmt.Errorf("measure: %d workers: this host takes at most %d (%d per core)", o.Workers, most, maxWorkersPerCore)
	}
	if o.Bytes < chunkSize || o.Bytes > 1<<40 {
		return o, fmt.Errorf("measure: %d bytes: give one chunk (%d) to 1 TiB", o.Bytes, chunkSize)
	}
	if len(o.Levels) > 20 {
		return o, fmt.Errorf("measure: %d levels: give at most 20", len(o.Levels))
	}
	for _, l := range o.Levels {
		if l < 0 || l > 19 {
			return o, fmt.Errorf("measure: zstd level %d: give 0 (none) to 19", l)
		}
	}
	return o, nil
}

// Pipeline measures what a backup does to every chunk after reading it:
// the keyed BLAKE3 chunk ID, zstd at the level, AES-256-GCM sealing. The
// data is synthetic and reproducible: three quarters text-like (words of
// a small vocabulary, which compresses to about a third, like OS files)
// and one quarter random (already compressed files).
func Pipeline(ctx context.Context, o PipelineOptions) ([]PipelineResult, error) {
	o, err := o.Checked()
	if err != nil {
		return nil, err
	}
	master, err := crypto.NewMasterKey()
	if err != nil {
		return nil, err
	}
	key, err := crypto.NewKey(master)
	if err != nil {
		return nil, err
	}
	data := testData(32 << 20)
	cores := float64(min(o.Workers, runtime.NumCPU()))
	var out []PipelineResult
	for _, level := range o.Levels {
		chunks := o.Bytes / chunkSize
		var next, sealed atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, o.Workers)
		start := time.Now()
		for w := range o.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				enc, err := repo.NewEncoderWith(key, level)
				if err != nil {
					errs[w] = err
					return
				}
				h := key.NewHasher()
				var dst []byte
				for {
					i := next.Add(1) - 1
					if i >= chunks || ctx.Err() != nil {
						return
					}
					off := (i * chunkSize) % int64(len(data))
					c := data[off : off+chunkSize]
					_ = h.Sum(c)
					dst, _ = enc.Encode(dst[:0], c)
					sealed.Add(int64(len(dst)))
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		if err := ctx.Err(); err != nil {
			return out, err
		}
		for _, err := range errs {
			if err != nil {
				return out, fmt.Errorf("measure: level %d: %w", level, err)
			}
		}
		in := float64(chunks * chunkSize)
		rate := in / took.Seconds()
		out = append(out, PipelineResult{Level: level, Workers: o.Workers, Rate: rate, PerCore: rate / cores, StoredRatio: float64(sealed.Load()) / in})
	}
	return out, nil
}

// testData is n bytes (a multiple of the chunk size): per chunk, three
// quarters text-like and one quarter random.
func testData(n int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	words := make([][]byte, 512)
	for i := range words {
		w := make([]byte, 2+r.IntN(9))
		for k := range w {
			w[k] = 'a' + byte(r.IntN(26))
		}
		words[i] = w
	}
	out := make([]byte, 0, n)
	for len(out) < n {
		text := len(out) + chunkSize*3/4
		for len(out) < text {
			out = append(out, words[r.IntN(len(words))]...)
			out = append(out, ' ')
		}
		out = out[:text]
		for len(out) < text+chunkSize/4 {
			out = append(out, byte(r.Uint32()))
		}
	}
	return out[:n]
}
