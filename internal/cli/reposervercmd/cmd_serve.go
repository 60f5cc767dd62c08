package reposervercmd

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/reposerver"
	"github.com/coffer-backup/coffer/internal/server"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

type serveFlags struct {
	dir, credentials, listen string
	certFile, keyFile        string
	hosts                    []string
	maxObject                string
	allowRoot, immutable     bool
}

func (a *app) cmdServe() *cobra.Command {
	var f serveFlags
	cmd := command.FaceOnly(&cobra.Command{
		Use:   "serve",
		Short: "serve a repository directory over HTTPS to the clients in the credentials file",
		Long: command.Manual(`Serve the repository in --dir over HTTPS at --listen to the clients whose
credentials are in --credentials, each within its right (see coffer
repository credential). TLS is always on: with --tls-cert and --tls-key,
or else a self-signed certificate made at the first start in the
repository's parent directory (its path is printed; clients trust it
with --repo-ca-file). Objects of points written with --immutable-for are
made immutable on the file system until their lock lapses, recorded in
DIR.retention (--immutable, on by default: it needs ext4 or XFS and the
capability CAP_LINUX_IMMUTABLE, and refuses to start without them). It
refuses to run as root (--allow-root for tests):
run it as its own unprivileged user, who owns the directory. SIGHUP
rereads the credentials file; SIGTERM or Ctrl-C stops it, letting
requests in flight finish.`,
			"A line naming the address, the certificate and the number of credentials.",
			"coffer repository serve --dir /srv/coffer/repo --credentials /etc/coffer/repository-credentials.yaml --listen :8444",
			"0 when stopped; 2 for a bad flag, credentials file or certificate."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd, f) },
	}, "the repository server's own process on the storage host")
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "the repository directory to serve (required; made by coffer init)")
	fl.StringVar(&f.credentials, "credentials", "", "the credentials file (required; coffer repository credential add)")
	fl.StringVar(&f.listen, "listen", ":8444", "address to serve HTTPS on")
	fl.StringVar(&f.certFile, "tls-cert", "", "PEM certificate (default: a self-signed one beside the directory)")
	fl.StringVar(&f.keyFile, "tls-key", "", "PEM key of --tls-cert")
	fl.StringSliceVar(&f.hosts, "tls-hosts", nil, "names and addresses the self-signed certificate is made for (besides localhost)")
	fl.StringVar(&f.maxObject, "max-object-size", "1GiB", "the largest object a client may write")
	fl.BoolVar(&f.allowRoot, "allow-root", false, "run as root (for tests; a repository server runs as its own user)")
	fl.BoolVar(&f.immutable, "immutable", true,
		"make the objects of points written with --immutable-for immutable on the file system until their lock lapses (ext4 or XFS, and CAP_LINUX_IMMUTABLE)")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagRequired("credentials")
	return cmd
}

func (a *app) serve(cmd *cobra.Command, f serveFlags) error {
	if os.Geteuid() == 0 && !f.allowRoot {
		return api.Errorf(api.Invalid, "coffer repository serve refuses to run as root: run it as the repository's own unprivileged user")
	}
	o := reposerver.DefaultOptions
	var err error
	if o.MaxObjectBytes, err = config.ParseSize(f.maxObject); err != nil {
		return api.Errorf(api.Invalid, "--max-object-size: %v", err)
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return api.Errorf(api.Invalid, "--tls-cert and --tls-key go together")
	}
	creds, err := reposerver.LoadCredentials(f.credentials)
	if err != nil {
		return api.WithClass(api.Invalid, err)
	}
	st, err := local.Open(f.dir)
	if err != nil {
		return err
	}
	defer st.Close()
	cert, err := server.LoadCertificate(f.certFile, f.keyFile, st.Root()+".tls", f.hosts)
	if err != nil {
		return api.WithClass(api.Invalid, err)
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return api.WithClass(api.Invalid, err)
	}
	var served store.Store = st
	if f.immutable {
		im, err := reposerver.NewImmutable(st)
		if err != nil {
			return api.Errorf(api.Invalid, "%v (or serve with --immutable=false: nothing then stops a maintain credential deleting locked points)", err)
		}
		n, err := im.Reapply(cmd.Context())
		if err != nil {
			return err
		}
		if n > 0 {
			a.Log.Warn("repository server: objects made immutable again after a crash", "objects", n)
		}
		served = im
	}
	srv := reposerver.New(served, creds, o, a.Log)
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go a.reloadOnHUP(ctx, srv, f.credentials)
	fmt.Fprintf(cmd.OutOrStdout(), "coffer repository serve: serving %s at https://%s to %d credentials (certificate %s, SHA-256 %s)\n",
		st.Root(), ln.Addr(), len(creds), cert.CertFile, cert.Fingerprint)
	hs := &http.Server{TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert.Certificate}}}
	return srv.Serve(ctx, hs, func() error { return hs.ServeTLS(ln, "", "") })
}

// reloadOnHUP rereads the credentials file on SIGHUP; a file that does
// not load leaves the credentials in force as they were.
func (a *app) reloadOnHUP(ctx context.Context, srv *reposerver.Server, file string) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		creds, err := reposerver.LoadCredentials(file)
		if err != nil {
			a.Log.Error("repository server: credentials not reloaded; the old ones stay in force", "err", err)
			continue
		}
		srv.SetCredentials(creds)
		a.Log.Info("repository server: credentials reloaded", "credentials", len(creds))
	}
}
