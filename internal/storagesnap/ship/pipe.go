package ship

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// pipe runs send | receive, counting the stream's bytes on the way: the
// size of a shipment is what it put on the wire.
func pipe(ctx context.Context, send, receive *exec.Cmd) (int64, error) {
	var sendErr, recvErr bytes.Buffer
	send.Stderr, receive.Stderr = &sendErr, &recvErr
	out, err := send.StdoutPipe()
	if err != nil {
		return 0, err
	}
	in, err := receive.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := receive.Start(); err != nil {
		return 0, fmt.Errorf("btrfs receive: %w", err)
	}
	if err := send.Start(); err != nil {
		_ = in.Close()
		_ = receive.Wait()
		return 0, fmt.Errorf("btrfs send: %w", err)
	}
	n, copyErr := io.Copy(&stepWriter{w: in}, out)
	closeErr := in.Close() // the end of the stream: receive finishes
	if copyErr != nil {
		// receive stopped reading (it failed): send must not block on a
		// pipe nobody reads.
		_ = out.Close()
	}
	sErr := send.Wait()
	rErr := receive.Wait()
	switch {
	case rErr != nil: // first: a failed receive breaks send's pipe
		return n, fmt.Errorf("btrfs receive: %w: %s", rErr, strings.TrimSpace(recvErr.String()))
	case sErr != nil:
		return n, fmt.Errorf("btrfs send: %w: %s", sErr, strings.TrimSpace(sendErr.String()))
	case ctx.Err() != nil:
		return n, ctx.Err()
	}
	return n, errors.Join(copyErr, closeErr)
}

// stepWriter reports the step "streaming" once, after the first write:
// a kill there interrupts a receive half-way.
type stepWriter struct {
	w    io.Writer
	seen bool
}

func (s *stepWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if !s.seen {
		s.seen = true
		step("streaming")
	}
	return n, err
}
