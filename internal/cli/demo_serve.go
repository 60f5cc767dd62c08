package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/server"
)

// demoListen is where `coffer demo --serve` serves by default: a free
// loopback port, so that the demo never fails because 8080 or 8443 is
// taken; the URL printed says which port it got.
const demoListen = "127.0.0.1:0"

// demoPlace is the demo's directory: its repository, password, catalog,
// state and its own configuration file, so that neither the host's
// configuration (its policies, its server section) nor its catalog plays
// any part, and `coffer server` over the same settings shows exactly the
// demo's points and jobs.
type demoPlace struct{ dir string }

func (d demoPlace) path(name string) string { return filepath.Join(d.dir, name) }

// args are the global flags of every command the demo runs.
func (d demoPlace) args() []string {
	return []string{"--config", d.path("coffer.yaml"), "--repo", d.path("repo"), "--password-file", d.path("password"),
		"--state-dir", d.path("state"), "--catalog", d.path("catalog.db")}
}

// demoVMConfig is the VM demo's configuration: embedded defaults, and its
// guest as a connection (its QMP socket) and a policy, so that the
// console over the demo's results shows one VM protected by one policy,
// with its points and its runs.
const demoVMConfig = `# coffer demo: embedded defaults, and the demo's VM as a connection and a policy
connections:
  - {name: demo, kind: qemu, options: {sockets: [%q]}}
policies:
  - {name: demo, connection: demo, snapshot: quiesced}
`

// demoServerConfig lets the demo's administrator sign in with the
// password alone: a real server asks Admin and RepositoryAdmin users for a
// second factor (server.require-second-factor), but the demo lives for
// minutes on loopback, and asking a newcomer to set up a TOTP app before
// the first page would stand between them and what the demo shows.
const demoServerConfig = `# The demo's administrator signs in with the password alone: a real
# server asks administrators for a second factor (docs/04-policies-and-server.md).
server:
  require-second-factor: []
`

// demoQMP is where the demo's guest listens for coffer's QMP connection.
func (d demoPlace) demoQMP() string { return filepath.Join(d.dir, "vm", "qmp.sock") }

// prepare writes the configuration (the VM demo's, or embedded defaults
// alone) and a random repository password.
func (d demoPlace) prepare(withVM bool) error {
	cfg := "# coffer demo: embedded defaults\n"
	if withVM {
		cfg = fmt.Sprintf(demoVMConfig, d.demoQMP())
	}
	cfg += demoServerConfig
	if err := os.WriteFile(d.path("coffer.yaml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	pw := make([]byte, 16)
	_, _ = rand.Read(pw)
	return os.WriteFile(d.path("password"), []byte(hex.EncodeToString(pw)), 0o600)
}

// run runs one coffer command on the demo's settings.
func (d demoPlace) run(ctx context.Context, a *app, args ...string) error {
	if code := Execute(ctx, append(d.args(), args...), a.Stdin, a.Stdout, a.Stderr); code != 0 {
		return fmt.Errorf("coffer %v failed with exit code %d", args, code)
	}
	return nil
}

// checkDemoListen refuses, before the demo runs, an address the demo's
// server could not serve plain HTTP on.
func checkDemoListen(listen string) error {
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return command.Usagef("--listen %q is not HOST:PORT (like 127.0.0.1:8080): %v", listen, err)
	}
	if err := server.CheckPlainHTTP(listen); err != nil {
		return command.Usagef("--listen: %v; to reach the console from another machine forward a port over ssh (ssh -L 8080:127.0.0.1:8080 HOST, then --listen 127.0.0.1:8080)", err)
	}
	return nil
}

// serveDemo serves the API and the console over the demo's repository
// and catalog until ctx ends (Ctrl-C, SIGTERM), through `coffer server`
// itself. Plain HTTP on loopback: nothing crosses the network, and a
// newcomer's browser opens the link without a certificate warning to
// click through (the server refuses plain HTTP on any other address).
func (a *app) serveDemo(ctx context.Context, d demoPlace, listen string, kept bool) error {
	srv := newApp(&command.App{Stdin: a.Stdin, Stdout: a.Stdout, Stderr: a.Stderr})
	srv.Announce = func(url string, link *api.SetupLink) { a.announceDemo(url, link, d, kept) }
	// The server's warnings for an operator (no policy has a schedule,
	// ...) would only puzzle a newcomer here: errors only, unless the
	// log level was asked for.
	level := "error"
	if l, src := a.Res.Get("log-level"); src != config.FromDefault {
		level = l
	}
	args := append(d.args(), "--log-level", level, "server", "--insecure-http", "--listen", listen)
	if code := srv.execute(ctx, args); code != 0 {
		// The server printed why (and what to do); the demo ends with its
		// exit code.
		return command.Reported{Err: api.Errorf(classOfExit(code), "the demo's console server stopped with exit code %d (its message is above)", code), Advised: true}
	}
	return nil
}

// classOfExit is an error class command.ExitCodes maps to code (where several
// do, any: they end with the same code).
func classOfExit(code int) api.Class {
	for class, c := range command.ExitCodes {
		if c == code {
			return class
		}
	}
	return api.Internal
}

// announceDemo prints where the console is, prominently: the setup link
// is the one thing the person must copy.
func (a *app) announceDemo(url string, link *api.SetupLink, d demoPlace, kept bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n==> the web console on the demo's results is served at %s/ui/\n", url)
	if link != nil {
		fmt.Fprintf(&b, "    open this one-time link (within the hour) to choose the password of %s and sign in:\n\n", link.User)
		fmt.Fprintf(&b, "        %s\n\n", link.Link)
	} else {
		b.WriteString("    sign in with the password chosen before\n")
	}
	b.WriteString("    The dashboard shows demo-vm protected by policy demo, Backup points its two points, Tasks the demo's runs, verify and restore.\n")
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	fmt.Fprintf(&b, "    From another machine: ssh -L %s:%s:%s THIS-HOST, then open the link there.\n", port, host, port)
	if kept {
		fmt.Fprintf(&b, "    Ctrl-C stops the server; %s is kept.\n", d.dir)
	} else {
		fmt.Fprintf(&b, "    Ctrl-C stops the server and removes %s (keep it with --keep).\n", d.dir)
	}
	fmt.Fprint(a.Stdout, b.String())
}

// consoleHint is the demo's last lines without --serve: how to see its
// results in the console.
func (a *app) consoleHint(d demoPlace, kept bool) {
	fmt.Fprintln(a.Stdout, "==> to see these results in the web console: coffer demo --serve")
	fmt.Fprintln(a.Stdout, "    (the demo again, then a server on 127.0.0.1 over its results with a one-time login link, until Ctrl-C)")
	if kept {
		q := make([]string, 0, len(d.args()))
		for _, s := range d.args() {
			q = append(q, shellQuote(s))
		}
		fmt.Fprintf(a.Stdout, "    or serve the results kept in %s:\n    coffer %s server --insecure-http --listen 127.0.0.1:8080\n", d.dir, strings.Join(q, " "))
	}
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
