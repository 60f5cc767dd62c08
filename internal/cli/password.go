package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/term"
)

// password resolves the repository password: password file, then the
// COFFER_PASSWORD variable, then a prompt on a terminal.
func (a *app) password(confirm bool) ([]byte, error) {
	return a.passwordFrom("password-file", "password", confirm)
}

func (a *app) passwordFrom(fileKey, valueKey string, confirm bool) ([]byte, error) {
	if path := a.res.Path(fileKey); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, usagef("password file: %v", err)
		}
		pw := strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			return nil, usagef("password file %s is empty", path)
		}
		return []byte(pw), nil
	}
	if pw := a.res.String(valueKey); pw != "" {
		return []byte(pw), nil
	}
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return a.prompt(f, confirm)
	}
	return nil, nil
}

func (a *app) prompt(f *os.File, confirm bool) ([]byte, error) {
	fmt.Fprint(a.stderr, "repository password: ")
	pw, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(a.stderr)
	if err != nil {
		return nil, err
	}
	if confirm {
		fmt.Fprint(a.stderr, "repeat password: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return nil, err
		}
		if string(again) != string(pw) {
			return nil, usagef("passwords do not match")
		}
	}
	return pw, nil
}

// readLine reads one line from stdin (for key add with piped input).
func (a *app) readLine() (string, error) {
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
