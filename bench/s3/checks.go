package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
)

// checkSpace fails early, naming the sizes, when work's file system cannot
// hold what the run writes: the modified copy, a local repository, the S3
// server's copy of one, a restored image at a time (each removed once
// compared) and the peers' repositories and restores, each at most the
// image's allocated bytes. A full disk would otherwise fail a step many
// minutes in.
func checkSpace(image, work string) error {
	fi, err := os.Stat(image)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	allocated := st.Blocks * 512
	copies := int64(4)
	for _, tool := range []string{"restic", "kopia"} {
		if findTool(tool) != "" {
			copies += 2
		}
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(work, &fs); err != nil {
		return err
	}
	free := int64(fs.Bavail) * fs.Bsize
	if need := copies * allocated; free < need {
		return fmt.Errorf("%s has %.1f GiB free; the run needs up to %.1f GiB (%d copies of the %.1f GiB %s holds): use -work on a larger file system",
			work, gib(free), gib(need), copies, gib(allocated), image)
	}
	return nil
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }

// sameContents reports the first difference between files a and b.
func sameContents(a, b string) error {
	fa, err := os.Open(a)
	if err != nil {
		return err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return err
	}
	defer fb.Close()
	ba, bb := make([]byte, 4<<20), make([]byte, 4<<20)
	for off := int64(0); ; {
		na, errA := io.ReadFull(fa, ba)
		nb, errB := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return fmt.Errorf("first difference in the 4 MiB at offset %d (%d and %d bytes read)", off, na, nb)
		}
		off += int64(na)
		endA, endB := errA == io.EOF || errA == io.ErrUnexpectedEOF, errB == io.EOF || errB == io.ErrUnexpectedEOF
		switch {
		case endA && endB:
			return nil
		case errA != nil && !endA:
			return errA
		case errB != nil && !endB:
			return errB
		}
	}
}
