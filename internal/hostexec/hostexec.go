// Package hostexec runs the commands a site plugs into coffer on the
// backup host (storage snapshot providers, backup hooks): each in its own
// process group, so that a timeout kills a shell script's children too,
// with the end of its stderr in the error to say why it failed.
package hostexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Run runs argv with env added to coffer's environment and returns its
// stdout. what names the command in errors. When ctx ends the whole
// process group is killed.
func Run(ctx context.Context, what string, argv, env []string) (string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return "", fmt.Errorf("%s: no command", what)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild that left the group may hold the output pipes open.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	switch {
	case ctx.Err() != nil && err != nil:
		return "", fmt.Errorf("%s did not finish in time and was killed: %w", what, ctx.Err())
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), fmt.Errorf("%s: %v: %s", what, err, Tail(stderr.String()))
		}
		return stdout.String(), fmt.Errorf("%s: %w", what, err)
	}
	return stdout.String(), nil
}

// Tail is the end of a command's output, enough to say why it failed.
func Tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 800 {
		s = "..." + s[len(s)-800:]
	}
	return s
}
