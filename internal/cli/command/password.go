package command

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/term"
)

// Password resolves the repository password: password file, then the
// COFFER_PASSWORD variable, then a prompt on a terminal.
func (a *App) Password(confirm bool) ([]byte, error) {
	return a.passwordFrom("password-file", "password", confirm)
}

func (a *App) passwordFrom(fileKey, valueKey string, confirm bool) ([]byte, error) {
	if path := a.Res.Path(fileKey); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, Usagef("password file: %v", err)
		}
		pw := strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			return nil, Usagef("password file %s is empty", path)
		}
		return []byte(pw), nil
	}
	if pw := a.Res.String(valueKey); pw != "" {
		return []byte(pw), nil
	}
	if f, ok := a.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return a.Prompt(f, confirm)
	}
	return nil, nil
}

// Prompt asks for the repository password on the terminal f (twice
// with confirm).
func (a *App) Prompt(f *os.File, confirm bool) ([]byte, error) {
	fmt.Fprint(a.Stderr, "repository password: ")
	pw, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(a.Stderr)
	if err != nil {
		return nil, err
	}
	if confirm {
		fmt.Fprint(a.Stderr, "repeat password: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.Stderr)
		if err != nil {
			return nil, err
		}
		if string(again) != string(pw) {
			return nil, Usagef("passwords do not match")
		}
	}
	return pw, nil
}

// ReadLine reads one line from stdin (for key add with piped input).
func (a *App) ReadLine() (string, error) {
	line, err := bufio.NewReader(a.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// RepositoryPassword is the repository's password, asked for now if it
// was not yet (once: the service asks the same cache).
func (a *App) RepositoryPassword() ([]byte, error) { return a.pw.password() }
