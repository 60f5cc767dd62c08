package accessops

import (
	"context"
	"os"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/auth/factorkey"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/service"
)

// Second factors as operations: what a user has enrolled, TOTP enrolment
// and removal, recovery codes, and the second step of a sign-in.
// internal/auth decides who may do what and audits it.

func init() { Operations = append(Operations, factorOperations...) }

var factorOperations = []service.Operation{
	{ID: "second-factors", Method: "SecondFactors", Summary: "what second factors a user has enrolled", HTTP: service.Get,
		Path: "/access/users/{user}/second-factors", DuringSignIn: true,
		SelfService: "one's own (also while sent to enrol one); others' need Sys.Audit on /access (internal/auth)",
		Endpoint:    service.Returns(Ops.SecondFactors)},
	{ID: "enrol-totp", AuditsItself: true, Method: "EnrolTOTP", Summary: "start a TOTP enrolment: the seed, its otpauth URI and QR code (shown once)",
		HTTP: service.Post, Path: "/access/users/{user}/totp", DuringSignIn: true,
		SelfService: "each user enrols their own, also while sent to enrol (internal/auth)", Endpoint: service.Creates(Ops.EnrolTOTP)},
	{ID: "confirm-totp", AuditsItself: true, Method: "ConfirmTOTP", Summary: "complete a TOTP enrolment with the app's first code; answers the recovery codes (shown once)",
		HTTP: service.Post, Path: "/access/users/{user}/totp/confirm", DuringSignIn: true,
		SelfService: "each user confirms their own; wrong codes are throttled (internal/auth)", Endpoint: service.Returns(Ops.ConfirmTOTP)},
	{ID: "remove-totp", AuditsItself: true, Method: "RemoveTOTP", Summary: "remove a user's TOTP", HTTP: service.Delete,
		Path: "/access/users/{user}/totp", SelfService: "one's own in a full session; anyone's with Perm.Modify on /access (internal/auth)",
		Endpoint: service.ReturnsNothing(Ops.RemoveTOTP)},
	{ID: "regenerate-recovery-codes", AuditsItself: true, Method: "RegenerateRecoveryCodes", Summary: "replace a user's recovery codes (shown once)",
		HTTP: service.Post, Path: "/access/users/{user}/recovery-codes",
		SelfService: "one's own in a full session; anyone's with Perm.Modify on /access (internal/auth)", Endpoint: service.Creates(Ops.RegenerateRecoveryCodes)},
	{ID: "verify-second-factor", AuditsItself: true, Method: "VerifySecondFactor", Summary: "the second step of a sign-in: a TOTP code or a recovery code",
		HTTP: service.Post, Path: "/access/second-factor", DuringSignIn: true,
		SelfService:      "completes the caller's own sign-in; throttled and audited by internal/auth",
		NotOnCommandLine: "a browser's sign-in: the command line uses API tokens", Endpoint: service.Returns(Ops.VerifySecondFactor)},
}

// withFactors runs fn with the access control and the server's
// second-factor key: the server's, or (on the server's host) one over the
// catalog with the key from the state directory.
func (s Ops) withFactors(ctx context.Context, fn func(*auth.Service) error) error {
	if s.Config.Access != nil {
		return fn(s.Config.Access)
	}
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	o := s.Config.AccessOptions
	if s.Config.StateDir != "" {
		path := factorkey.File(s.Config.StateDir)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if o.SecondFactorKey, err = factorkey.Load(path); err != nil {
			return err
		}
	}
	a, err := auth.New(c, o)
	if err != nil {
		return err
	}
	return fn(a)
}

func factors[T any](ctx context.Context, s Ops, fn func(*auth.Service) (T, error)) (T, error) {
	var out T
	err := s.withFactors(ctx, func(a *auth.Service) error {
		var err error
		out, err = fn(a)
		return err
	})
	return out, err
}

// SecondFactors says what a user has enrolled.
func (s Ops) SecondFactors(ctx context.Context, in *api.UserParam) (*api.SecondFactors, error) {
	st, err := access(ctx, s, func(a *auth.Service) (auth.SecondFactorStatus, error) {
		return a.SecondFactors(ctx, s.Actor(ctx), in.User)
	})
	if err != nil {
		return nil, err
	}
	out := &api.SecondFactors{User: st.User, TOTP: st.TOTP, TOTPPending: st.TOTPPending, RecoveryCodes: st.RecoveryCodes,
		Required: st.Required, SecurityKeys: []api.SecurityKey{}}
	for _, k := range st.Keys {
		out.SecurityKeys = append(out.SecurityKeys, securityKeyDoc(k))
	}
	return out, nil
}

func securityKeyDoc(k catalog.WebAuthnCredential) api.SecurityKey {
	return api.SecurityKey{ID: k.ID, Name: k.Name, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt}
}

// EnrolTOTP starts a TOTP enrolment: the answer is the only time the seed
// is shown.
func (s Ops) EnrolTOTP(ctx context.Context, in *api.EnrolTOTPInput) (*api.TOTPEnrolment, error) {
	en, err := factors(ctx, s, func(a *auth.Service) (auth.TOTPEnrolment, error) {
		return a.EnrolTOTP(ctx, s.Actor(ctx), in.User, service.RemoteAddr(ctx))
	})
	if err != nil {
		return nil, err
	}
	return &api.TOTPEnrolment{User: in.User, Secret: en.Secret, URI: en.URI, QRCodePNG: en.QRCodePNG}, nil
}

// ConfirmTOTP completes a TOTP enrolment; the answer carries the new
// recovery codes, shown this once.
func (s Ops) ConfirmTOTP(ctx context.Context, in *api.ConfirmTOTPInput) (*api.RecoveryCodes, error) {
	codes, err := factors(ctx, s, func(a *auth.Service) ([]string, error) {
		return a.ConfirmTOTP(ctx, s.Actor(ctx), in.User, in.Body.Code, service.RemoteAddr(ctx))
	})
	if err != nil {
		return nil, err
	}
	return &api.RecoveryCodes{User: in.User, Codes: codes}, nil
}

// RemoveTOTP removes a user's TOTP.
func (s Ops) RemoveTOTP(ctx context.Context, in *api.UserParam) error {
	return s.withAccess(ctx, func(a *auth.Service) error {
		return a.RemoveTOTP(ctx, s.Actor(ctx), in.User, service.RemoteAddr(ctx))
	})
}

// RegenerateRecoveryCodes replaces a user's recovery codes.
func (s Ops) RegenerateRecoveryCodes(ctx context.Context, in *api.UserParam) (*api.RecoveryCodes, error) {
	codes, err := access(ctx, s, func(a *auth.Service) ([]string, error) {
		return a.RegenerateRecoveryCodes(ctx, s.Actor(ctx), in.User, service.RemoteAddr(ctx))
	})
	if err != nil {
		return nil, err
	}
	return &api.RecoveryCodes{User: in.User, Codes: codes}, nil
}

// VerifySecondFactor takes the second step of the caller's sign-in.
func (s Ops) VerifySecondFactor(ctx context.Context, in *api.SecondStepInput) (*api.Caller, error) {
	sub, err := factors(ctx, s, func(a *auth.Service) (*auth.Subject, error) {
		return a.VerifySecondFactor(ctx, s.Actor(ctx), in.Body.Code, service.RemoteAddr(ctx))
	})
	if err != nil {
		return nil, err
	}
	return &api.Caller{User: sub.User}, nil
}
