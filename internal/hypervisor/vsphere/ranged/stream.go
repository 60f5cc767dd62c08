package ranged

import (
	"io"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Stream reads src front to back as one stream of size bytes: data in its
// allocated extents, zeros elsewhere, nothing past size. It is for
// transports that can only replace a whole file (a /folder PUT), which
// is why they send holes as bytes.
func Stream(src hypervisor.DiskSource, size int64) io.Reader {
	return &diskStream{src: src, ext: src.Allocated(), size: size}
}

type diskStream struct {
	src  hypervisor.DiskSource
	ext  []hypervisor.Extent
	pos  int64
	size int64
}

func (s *diskStream) Read(p []byte) (int, error) {
	if s.pos >= s.size {
		return 0, io.EOF
	}
	if rest := s.size - s.pos; int64(len(p)) > rest {
		p = p[:rest]
	}
	for len(s.ext) > 0 && s.ext[0].Offset+s.ext[0].Length <= s.pos {
		s.ext = s.ext[1:]
	}
	if len(s.ext) == 0 || s.ext[0].Offset > s.pos {
		end := s.size // a hole up to the next extent or the end
		if len(s.ext) > 0 {
			end = s.ext[0].Offset
		}
		n := int(min(int64(len(p)), end-s.pos))
		clear(p[:n])
		s.pos += int64(n)
		return n, nil
	}
	e := s.ext[0]
	n := int(min(int64(len(p)), e.Offset+e.Length-s.pos))
	m, err := s.src.ReadAt(p[:n], s.pos)
	s.pos += int64(m)
	if err == io.EOF && m == n {
		err = nil
	}
	return m, err
}
