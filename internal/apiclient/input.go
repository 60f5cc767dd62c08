package apiclient

import (
	"github.com/coffer-backup/coffer/internal/api"
)

// RequestOf is the request that calls operation op with in, the
// operation's input struct as the server decodes it (api.EncodeInput).
func RequestOf(op string, in any) (Request, error) {
	e, err := api.EncodeInput(in)
	if err != nil {
		return Request{}, api.WithClass(api.Internal, err)
	}
	return Request{Op: op, Path: e.Path, Query: e.Query, Header: e.Header, Body: e.Body}, nil
}
