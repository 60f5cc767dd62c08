package extsort

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
)

// Ordered stores records that arrive already in ascending order (the output
// of a merge-join of sorted streams) for reading back with a Cursor. It
// sorts nothing and holds no more than its write buffer in memory, however
// many records it stores.
type Ordered struct {
	size int
	f    *os.File
	w    *bufio.Writer
	last []byte
	n    int64
}

// NewOrdered returns an empty sequence of records of size bytes, stored in
// an unnamed file in dir.
func NewOrdered(size int, dir string) (*Ordered, error) {
	f, err := tempFile(dir)
	if err != nil {
		return nil, err
	}
	return &Ordered{size: size, f: f, w: bufio.NewWriterSize(f, maxRunBuffer), last: make([]byte, 0, size)}, nil
}

// Add appends one record; it must not be smaller than the previous one.
func (o *Ordered) Add(rec []byte) error {
	if len(rec) != o.size {
		return fmt.Errorf("extsort: record of %d bytes, want %d", len(rec), o.size)
	}
	if o.n > 0 && bytes.Compare(rec, o.last) < 0 {
		return fmt.Errorf("extsort: record %x added after %x to an ordered sequence", rec, o.last)
	}
	if _, err := o.w.Write(rec); err != nil {
		return err
	}
	o.last = append(o.last[:0], rec...)
	o.n++
	return nil
}

// Len is the number of records added.
func (o *Ordered) Len() int64 { return o.n }

// Cursor returns a cursor positioned on the first record; it owns the file
// from then on (close the cursor, not the sequence).
func (o *Ordered) Cursor() (*Cursor, error) {
	if err := o.w.Flush(); err != nil {
		_ = o.f.Close() // the unlinked file is discarded with the error
		return nil, err
	}
	if _, err := o.f.Seek(0, io.SeekStart); err != nil {
		_ = o.f.Close() // the unlinked file is discarded with the error
		return nil, err
	}
	c := &Cursor{f: o.f, r: bufio.NewReaderSize(o.f, maxRunBuffer), rec: make([]byte, o.size)}
	return c, c.Next()
}

// Close discards the sequence (when no cursor was taken).
func (o *Ordered) Close() { _ = o.f.Close() } // unlinked: its data is discarded

// Each calls fn with every record from the current one to the end (the
// slice is valid only during the call); an error from fn stops it and is
// returned.
func (c *Cursor) Each(fn func(rec []byte) error) error {
	for c.ok {
		if err := fn(c.rec); err != nil {
			return err
		}
		if err := c.Next(); err != nil {
			return err
		}
	}
	return nil
}
