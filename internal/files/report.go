package files

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"sync"
)

// Skip is an entry that was not extracted, or a directory a walk could not
// descend into, and why. Nothing is skipped without one.
type Skip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Warning is one distinct message and how often it came up.
type Warning struct {
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// warnings counts distinct messages in the order first seen, so that a
// message raised for each of a thousand inodes is reported once.
type warnings struct {
	mu    sync.Mutex
	order []string
	count map[string]int
}

func (w *warnings) add(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.count == nil {
		w.count = map[string]int{}
	}
	if w.count[msg] == 0 {
		w.order = append(w.order, msg)
	}
	w.count[msg]++
}

func (w *warnings) list() []Warning {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Warning, 0, len(w.order))
	for _, m := range w.order {
		out = append(out, Warning{Message: m, Count: w.count[m]})
	}
	return out
}

// ImageReadError is a failure to read the disk image itself (in coffer:
// the repository or its storage), as opposed to damage inside the image.
// It ends a walk or an extraction instead of skipping one entry, since
// every further entry would fail the same way, and it keeps the cause
// (errors.Is finds a corrupt chunk or a missing pack through it).
type ImageReadError struct{ Err error }

func (e *ImageReadError) Error() string { return "reading the disk image: " + e.Err.Error() }
func (e *ImageReadError) Unwrap() error { return e.Err }

// imageReader tags the errors of the image reader (see ImageReadError).
type imageReader struct{ r io.ReaderAt }

func (i imageReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := i.r.ReadAt(p, off)
	if err != nil && err != io.EOF {
		err = &ImageReadError{Err: err}
	}
	return n, err
}

// fatal reports errors that end a walk: cancellation and a failing image
// reader. Everything else is damage confined to one entry.
func fatal(err error) bool {
	var ie *ImageReadError
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ie)
}

// reason turns an error from a filesystem reader into a one-line skip
// reason: some readers put whole structures into their messages.
func reason(prefix string, err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if len(msg) > 300 {
		msg = strings.ToValidUTF8(msg[:300], "") + "…"
	}
	return prefix + msg
}

// kindName names the kinds of file that are never extracted.
func kindName(m fs.FileMode) string {
	switch {
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "file of unknown type"
}
