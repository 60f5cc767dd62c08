package qmp

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"
)

// Exec runs a command in the guest (guest-exec) and waits for it; see
// GuestExec.
func (g *GuestAgent) Exec(ctx context.Context, argv []string) (string, error) {
	return GuestExec(ctx, g.Execute, argv)
}

// AgentCommand sends one guest agent command and decodes its return
// value into result: GuestAgent.Execute, or libvirt's agent passthrough.
type AgentCommand func(ctx context.Context, command string, args, result any) error

// GuestExec runs a command in the guest through the agent (guest-exec) and
// waits for it. The agent only reports a command's end when asked, so its
// status is polled. It returns a line of evidence (exit code and the ends
// of stdout and stderr); a non-zero exit is an error. When ctx ends first
// the command keeps running in the guest: the agent offers no way to stop
// it.
func GuestExec(ctx context.Context, execute AgentCommand, argv []string) (string, error) {
	var started struct {
		PID int `json:"pid"`
	}
	if err := execute(ctx, "guest-exec", map[string]any{"path": argv[0], "arg": argv[1:], "capture-output": true}, &started); err != nil {
		return "", err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var st struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			Signal   int    `json:"signal"`
			OutData  string `json:"out-data"`
			ErrData  string `json:"err-data"`
		}
		if err := execute(ctx, "guest-exec-status", map[string]any{"pid": started.PID}, &st); err != nil {
			return "", err
		}
		if st.Exited {
			out, _ := base64.StdEncoding.DecodeString(st.OutData)
			errOut, _ := base64.StdEncoding.DecodeString(st.ErrData)
			ev := fmt.Sprintf("exit %d; stdout %q; stderr %q", st.ExitCode, tail(string(out), 256), tail(string(errOut), 256))
			if st.ExitCode != 0 || st.Signal != 0 {
				return ev, fmt.Errorf("%s exited with %d (signal %d); stderr %q", argv[0], st.ExitCode, st.Signal, tail(string(errOut), 256))
			}
			return ev, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s still running in the guest: %w", argv[0], ctx.Err())
		case <-tick.C:
		}
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
