package accessops

import (
	"context"
	"encoding/json"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/auth/securitykey"
	"github.com/coffer-backup/coffer/internal/service"
)

// Security keys and passkeys (WebAuthn) as operations: a registration's
// two steps, a sign-in's second step with a key, a key's removal.
// internal/auth/securitykey runs the ceremonies; internal/auth decides
// who may do what, throttles and audits.

func init() { Operations = append(Operations, keyOperations...) }

const inABrowser = "a WebAuthn ceremony: the browser talks to the key (the console's Account and sign-in pages)"

var keyOperations = []service.Operation{
	{ID: "begin-security-key-registration", Method: "BeginSecurityKeyRegistration",
		Summary: "start registering a security key or passkey: the options of navigator.credentials.create",
		HTTP:    service.Post, Path: "/access/users/{user}/security-keys/registration", DuringSignIn: true,
		SelfService:      "each user registers their own keys, in a browser session, also while sent to enrol (internal/auth)",
		NotOnCommandLine: inABrowser, Endpoint: service.Returns(Ops.BeginSecurityKeyRegistration)},
	{ID: "register-security-key", AuditsItself: true, Method: "RegisterSecurityKey",
		Summary: "complete a security key's registration with its answer; answers recovery codes when it is the first factor (shown once)",
		HTTP:    service.Post, Path: "/access/users/{user}/security-keys", DuringSignIn: true,
		SelfService:      "each user registers their own keys, in a browser session (internal/auth)",
		NotOnCommandLine: inABrowser, Endpoint: service.Creates(Ops.RegisterSecurityKey)},
	{ID: "remove-security-key", AuditsItself: true, Method: "RemoveSecurityKey", Summary: "remove a user's security key",
		HTTP: service.Delete, Path: "/access/users/{user}/security-keys/{id}",
		SelfService: "one's own in a full session; anyone's with Perm.Modify on /access (internal/auth)",
		Endpoint:    service.ReturnsNothing(Ops.RemoveSecurityKey)},
	{ID: "begin-security-key-sign-in", Method: "BeginSecurityKeySignIn",
		Summary: "the second step of a sign-in with a security key: the options of navigator.credentials.get",
		HTTP:    service.Post, Path: "/access/second-factor/security-key/challenge", DuringSignIn: true,
		SelfService:      "the caller's own sign-in (internal/auth)",
		NotOnCommandLine: inABrowser, Endpoint: service.Returns(Ops.BeginSecurityKeySignIn)},
	{ID: "verify-security-key", AuditsItself: true, Method: "VerifySecurityKey",
		Summary: "the second step of a sign-in: the security key's answer to its challenge",
		HTTP:    service.Post, Path: "/access/second-factor/security-key", DuringSignIn: true,
		SelfService:      "completes the caller's own sign-in; throttled and audited by internal/auth",
		NotOnCommandLine: inABrowser, Endpoint: service.Returns(Ops.VerifySecurityKey)},
}

// keys runs fn with the security keys of the access control, for the
// server's address (server.public-url, or where it listens).
func keys[T any](ctx context.Context, s Ops, fn func(*securitykey.Keys) (T, error)) (T, error) {
	return factors(ctx, s, func(a *auth.Service) (T, error) { return fn(securitykey.New(a, s.Config.PublicURL)) })
}

// optionsDoc is a ceremony's options as the API's document.
func optionsDoc(publicKey any) (*api.SecurityKeyOptions, error) {
	b, err := json.Marshal(publicKey)
	if err != nil {
		return nil, err
	}
	out := &api.SecurityKeyOptions{}
	return out, json.Unmarshal(b, &out.PublicKey)
}

// BeginSecurityKeyRegistration starts a key's registration.
func (s Ops) BeginSecurityKeyRegistration(ctx context.Context, in *api.UserParam) (*api.SecurityKeyOptions, error) {
	return keys(ctx, s, func(k *securitykey.Keys) (*api.SecurityKeyOptions, error) {
		c, err := k.BeginRegistration(ctx, s.Actor(ctx), in.User)
		if err != nil {
			return nil, err
		}
		return optionsDoc(c.Response)
	})
}

// RegisterSecurityKey completes a key's registration.
func (s Ops) RegisterSecurityKey(ctx context.Context, in *api.RegisterSecurityKeyInput) (*api.RecoveryCodes, error) {
	answer, err := json.Marshal(in.Body.Credential)
	if err != nil {
		return nil, err
	}
	codes, err := keys(ctx, s, func(k *securitykey.Keys) ([]string, error) {
		return k.FinishRegistration(ctx, s.Actor(ctx), in.User, in.Body.Name, service.RemoteAddr(ctx), answer)
	})
	if err != nil {
		return nil, err
	}
	return &api.RecoveryCodes{User: in.User, Codes: codes}, nil
}

// RemoveSecurityKey removes a user's key.
func (s Ops) RemoveSecurityKey(ctx context.Context, in *api.SecurityKeyParam) error {
	return s.withAuth(ctx, true, func(a *auth.Service) error {
		return securitykey.Remove(ctx, a, s.Actor(ctx), in.User, in.ID, service.RemoteAddr(ctx))
	})
}

// BeginSecurityKeySignIn starts the second step with a key.
func (s Ops) BeginSecurityKeySignIn(ctx context.Context, _ *api.BeginSecurityKeySignInInput) (*api.SecurityKeyOptions, error) {
	return keys(ctx, s, func(k *securitykey.Keys) (*api.SecurityKeyOptions, error) {
		a, err := k.BeginSignIn(ctx, s.Actor(ctx))
		if err != nil {
			return nil, err
		}
		return optionsDoc(a.Response)
	})
}

// VerifySecurityKey takes the second step with the key's answer.
func (s Ops) VerifySecurityKey(ctx context.Context, in *api.SecurityKeySignInInput) (*api.Caller, error) {
	answer, err := json.Marshal(in.Body.Credential)
	if err != nil {
		return nil, err
	}
	sub, err := keys(ctx, s, func(k *securitykey.Keys) (*auth.Subject, error) {
		return k.FinishSignIn(ctx, s.Actor(ctx), service.RemoteAddr(ctx), answer)
	})
	if err != nil {
		return nil, err
	}
	return &api.Caller{User: sub.User}, nil
}
