package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/store"
)

// unlocked is the result of opening the key files with a password.
type unlocked struct {
	key     *crypto.Key
	keyID   string
	payload keyPayload
	good    []byte // the copy of the key file that opened
	health  []HealthIssue
}

// unlock tries every key file, both copies of each, with the password. A
// damaged or missing copy is worked around and reported; so is a key file
// of another password whose two copies differ or do not parse.
func unlock(ctx context.Context, st store.Store, password []byte) (*unlocked, error) {
	objs, err := readKeyObjects(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("read keys: %w", err)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("repository has no keys left: %w", crypto.ErrWrongPassword)
	}
	var found *unlocked
	var health []HealthIssue
	for _, k := range objs {
		names := keyNames(k.id)
		opened := -1
		for i, kf := range k.parsed {
			if kf == nil || found != nil {
				continue
			}
			secret, err := crypto.Unwrap(kf.Data, password, kf.KDF)
			if err != nil {
				continue // another password's key, or this copy is damaged
			}
			var p keyPayload
			if json.Unmarshal(secret, &p) != nil {
				continue
			}
			mk, err := crypto.NewKey(p.Master)
			if err != nil {
				return nil, err
			}
			found = &unlocked{key: mk, keyID: k.id, payload: p, good: k.raw[i]}
			opened = i
		}
		switch {
		case opened >= 0 && !bytes.Equal(k.raw[0], k.raw[1]):
			bad := names[1-opened]
			health = append(health, HealthIssue{Kind: "key", Object: bad,
				Detail: fmt.Sprintf("this copy of key %s is damaged or missing; the other copy opened the repository", short(k.id))})
		case opened < 0 && k.file() == nil:
			health = append(health, HealthIssue{Kind: "key", Object: names[0],
				Detail: fmt.Sprintf("both copies of key %s are damaged: that key's password no longer opens the repository (other keys still do)", short(k.id))})
		case opened < 0 && !bytes.Equal(k.raw[0], k.raw[1]):
			health = append(health, HealthIssue{Kind: "key", Object: names[0],
				Detail: fmt.Sprintf("the two copies of key %s differ, so one is damaged or missing; opening with that key's password tells which, and `coffer repair keys` then rewrites it", short(k.id))})
		}
	}
	if found == nil {
		return nil, crypto.ErrWrongPassword
	}
	found.health = health
	return found, nil
}

func short(keyID string) string { return keyID[:min(8, len(keyID))] }

// checkConfig compares the plaintext config with what the key file
// authenticates. The authenticated copy wins; without one (key files
// written before it existed), the repository ID and encryption scheme are
// still checked, as they always were.
func checkConfig(cfg Config, cfgErr error, u *unlocked) (Config, []HealthIssue, error) {
	p := u.payload
	if p.Config == nil {
		if cfgErr != nil {
			return cfg, nil, fmt.Errorf("%w; key %s carries no copy of the config to rebuild it from", cfgErr, short(u.keyID))
		}
		if p.Repository != cfg.ID || p.Encryption != cfg.Encryption {
			return cfg, nil, fmt.Errorf("key %s belongs to repository %s with encryption %q, but the config says %s with %q: the config was tampered with",
				short(u.keyID), p.Repository, p.Encryption, cfg.ID, cfg.Encryption)
		}
		return cfg, nil, nil
	}
	good := *p.Config
	if err := good.validate(); err != nil {
		return cfg, nil, fmt.Errorf("the authenticated copy of the config: %w", err)
	}
	switch {
	case errors.Is(cfgErr, ErrUnsupportedVersion):
		// Not newer after all: the authenticated copy, which validated,
		// says a version this coffer reads.
		return good, []HealthIssue{{Kind: "config", Object: configName,
			Detail: fmt.Sprintf("the config says format version %d, but its authenticated copy in key %s says %d: the config was damaged or edited; the copy is used instead",
				cfg.FormatVersion, short(u.keyID), good.FormatVersion)}}, nil
	case cfgErr != nil:
		return good, []HealthIssue{{Kind: "config", Object: configName,
			Detail: fmt.Sprintf("the config is damaged or missing (%v); the authenticated copy in key %s is used instead", cfgErr, short(u.keyID))}}, nil
	case !reflect.DeepEqual(normalise(cfg), normalise(good)):
		return good, []HealthIssue{{Kind: "config", Object: configName,
			Detail: fmt.Sprintf("the config differs from the authenticated copy in key %s (it was damaged or edited); the copy is used instead", short(u.keyID))}}, nil
	}
	return good, nil, nil
}

// normalise drops what JSON round trips do not preserve exactly.
func normalise(c Config) Config {
	c.Created = c.Created.UTC().Round(0)
	return c
}
