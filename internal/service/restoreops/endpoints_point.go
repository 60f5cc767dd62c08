package restoreops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"io"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// The endpoints that read a backup point: restores, the file browser and
// downloads, instant recovery and NBD exports. What they write on the
// server goes under its restore directory; what they serve beyond the
// answer runs in the server's Background.

func archiveFile(in *api.FilesArchiveInput) (string, string) {
	name := "coffer-" + safeName(in.Point)
	if in.Format == "tar" {
		return "application/x-tar", name + ".tar"
	}
	return "application/zip", name + ".zip"
}

// safeName keeps what may go in a download's file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

func epFilesArchive(ctx context.Context, svc *service.Service, in *api.FilesArchiveInput, w io.Writer) error {
	s := Ops{svc}
	_, err := s.FilesArchive(ctx, in, w)
	return err
}

// epInstantStart starts the VM and serves its disks from the server until
// the session is committed or discarded (or the server stops: the VM
// then waits, and instant-serve serves it again).
func epInstantStart(ctx context.Context, svc *service.Service, in *api.InstantStartInput) (*service.Created[*api.InstantSession], error) {
	s := Ops{svc}
	bg, err := s.Background("instant recovery")
	if err != nil {
		return nil, err
	}
	var doc api.InstantSession
	err = bg.Serve(ctx, func(ctx context.Context) (string, func() error, error) {
		sv, err := s.InstantStart(ctx, in)
		if err != nil {
			return "", nil, err
		}
		doc = sv.Doc
		return "instant " + doc.ID, sv.Wait, nil
	})
	if err != nil {
		return nil, err
	}
	return service.NewCreated(&doc), nil
}

// epInstantServe serves the session again in the server's Background.
func epInstantServe(ctx context.Context, svc *service.Service, in *api.InstantServeInput) (*service.Result[*api.InstantSession], error) {
	s := Ops{svc}
	bg, err := s.Background("serving an instant recovery")
	if err != nil {
		return nil, err
	}
	var doc api.InstantSession
	err = bg.Serve(ctx, func(ctx context.Context) (string, func() error, error) {
		sv, err := s.InstantServe(ctx, in)
		if err != nil {
			return "", nil, err
		}
		doc = sv.Doc.Session
		return "instant " + doc.ID, sv.Wait, nil
	})
	if err != nil {
		return nil, err
	}
	return &service.Result[*api.InstantSession]{Body: &doc}, nil
}

// epExport serves the point's disks over NBD for the duration asked (the
// command line serves until it is stopped; a request cannot stay).
func epExport(ctx context.Context, svc *service.Service, in *api.InstantExportInput) (*service.Created[*api.Export], error) {
	s := Ops{svc}
	bg, err := s.Background("an NBD export")
	if err != nil {
		return nil, err
	}
	listen := in.Body.Listen
	if name, ok := strings.CutPrefix(listen, "unix:"); ok {
		sock, err := service.Confine(s.Config.Files.ExportDir, "export directory", name)
		if err != nil {
			return nil, err
		}
		listen = "unix:" + sock
	} else if !strings.HasPrefix(listen, "tcp:") {
		return nil, service.Invalidf("listen must be unix:NAME (a socket in the server's export directory) or tcp:HOST:PORT, not %q", listen)
	}
	var doc api.Export
	err = bg.Serve(ctx, func(ctx context.Context) (string, func() error, error) {
		ctx, cancel := context.WithTimeout(ctx, api.Seconds(in.Body.DurationSeconds))
		call := *in
		call.Body.Listen = listen
		sv, err := s.InstantExport(ctx, &call)
		if err != nil {
			cancel()
			return "", nil, err
		}
		doc = sv.Doc
		return fmt.Sprintf("export %s", listen), func() error { defer cancel(); return sv.Wait() }, nil
	})
	if err != nil {
		return nil, err
	}
	return service.NewCreated(&doc), nil
}
