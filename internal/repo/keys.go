package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"sort"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

const (
	keysPrefix = "keys/"
	keyMagic   = "coffer-key"
)

// KeyFile is a key (password) of a repository: the master key sealed with a
// key derived from one password. Stored as JSON at keys/<key ID>.
type KeyFile struct {
	Magic   string     `json:"magic"`
	Version int        `json:"version"`
	Created time.Time  `json:"created"`
	Host    string     `json:"host"`
	User    string     `json:"user"`
	Label   string     `json:"label,omitempty"`
	KDF     crypto.KDF `json:"kdf"`
	Data    []byte     `json:"data"` // sealed keyPayload

	ID string `json:"-"`
}

// keyPayload is what a key file protects. Repeating the repository ID and
// the encryption scheme here binds the plaintext config to the key: a config
// edited to say "none" cannot downgrade a repository.
type keyPayload struct {
	Master     crypto.MasterKey `json:"master"`
	Repository string           `json:"repository"`
	Encryption string           `json:"encryption"`
}

// ErrLastKey refuses to remove the only key of a repository.
var ErrLastKey = errors.New("refusing to remove the last key: the repository would become unreadable")

func newKeyFile(payload keyPayload, password []byte, label string, kdf crypto.KDF) (*KeyFile, error) {
	secret, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	sealed, err := crypto.Wrap(secret, password, kdf)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	kf := &KeyFile{Magic: keyMagic, Version: 1, Created: time.Now().UTC(), Host: host, User: currentUser(), Label: label, KDF: kdf, Data: sealed, ID: id.Random().String()}
	return kf, nil
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

func saveKeyFile(ctx context.Context, st store.Store, kf *KeyFile) error {
	raw, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return err
	}
	_, err = store.Put(ctx, st, keysPrefix+kf.ID, raw, store.PutOptions{IfNotExists: st.Properties().ConditionalWrites})
	return err
}

func listKeyFiles(ctx context.Context, st store.Store) ([]*KeyFile, error) {
	var out []*KeyFile
	err := st.List(ctx, keysPrefix, func(fi store.ObjectInfo) error {
		raw, err := store.Get(ctx, st, fi.Name, 0, -1)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var kf KeyFile
		if err := json.Unmarshal(raw, &kf); err != nil || kf.Magic != keyMagic {
			return fmt.Errorf("key file %s is damaged", fi.Name)
		}
		kf.ID = strings.TrimPrefix(fi.Name, keysPrefix)
		out = append(out, &kf)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, err
}

// unlock tries every key file with the password.
func unlock(ctx context.Context, st store.Store, cfg Config, password []byte) (*crypto.Key, string, error) {
	files, err := listKeyFiles(ctx, st)
	if err != nil {
		return nil, "", fmt.Errorf("read keys: %w", err)
	}
	if len(files) == 0 {
		return nil, "", fmt.Errorf("repository has no keys left: %w", crypto.ErrWrongPassword)
	}
	for _, kf := range files {
		secret, err := crypto.Unwrap(kf.Data, password, kf.KDF)
		if errors.Is(err, crypto.ErrWrongPassword) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("key %s: %w", kf.ID[:8], err)
		}
		var p keyPayload
		if err := json.Unmarshal(secret, &p); err != nil {
			return nil, "", fmt.Errorf("key %s: damaged payload", kf.ID[:8])
		}
		if p.Repository != cfg.ID || p.Encryption != cfg.Encryption {
			return nil, "", fmt.Errorf("key %s belongs to repository %s with encryption %q, but the config says %s with %q: the config was tampered with",
				kf.ID[:8], p.Repository, p.Encryption, cfg.ID, cfg.Encryption)
		}
		k, err := crypto.NewKey(p.Master)
		return k, kf.ID, err
	}
	return nil, "", crypto.ErrWrongPassword
}

// Keys lists the key files (without secrets).
func (r *Repository) Keys(ctx context.Context) ([]*KeyFile, error) {
	return listKeyFiles(ctx, r.st)
}

// CurrentKeyID is the key file that unlocked this session.
func (r *Repository) CurrentKeyID() string { return r.keyID }

// AddKey adds a password to the repository.
func (r *Repository) AddKey(ctx context.Context, password []byte, label string) (*KeyFile, error) {
	if !r.key.Encrypted() {
		return nil, errors.New("repository is not encrypted: it has no keys")
	}
	kf, err := newKeyFile(keyPayload{Master: r.key.Master(), Repository: r.cfg.ID, Encryption: r.cfg.Encryption}, password, label, crypto.DefaultKDF())
	if err != nil {
		return nil, err
	}
	// A new key is locked as long as the config (the longest-locked point):
	// a password that opens locked points must last as long as they do. A
	// crash before the lock leaves it to the next locked backup.
	until, err := r.metadataLock(ctx)
	if err != nil {
		return nil, err
	}
	if err := saveKeyFile(ctx, r.st, kf); err != nil {
		return nil, err
	}
	if rt, ok := r.st.(store.Retainer); ok && !until.IsZero() {
		if err := rt.ExtendRetention(ctx, keysPrefix+kf.ID, until); err != nil {
			return nil, fmt.Errorf("key %s was added but not locked: %w", kf.ID[:8], err)
		}
	}
	return kf, nil
}

// RemoveKey removes a key file by ID or unique prefix. The last key cannot
// be removed.
func (r *Repository) RemoveKey(ctx context.Context, prefix string) (string, error) {
	files, err := listKeyFiles(ctx, r.st)
	if err != nil {
		return "", err
	}
	var match []*KeyFile
	for _, kf := range files {
		if strings.HasPrefix(kf.ID, prefix) {
			match = append(match, kf)
		}
	}
	switch {
	case len(match) == 0:
		return "", fmt.Errorf("no key with ID %q", prefix)
	case len(match) > 1:
		return "", fmt.Errorf("key ID %q is ambiguous (%d keys)", prefix, len(match))
	case len(files) == 1:
		return "", ErrLastKey
	}
	err = r.st.Delete(ctx, keysPrefix+match[0].ID)
	if errors.Is(err, store.ErrRetained) {
		return "", fmt.Errorf("key %s opens immutable backup points and stays as long as they are locked; remove it once its lock has ended: %w", match[0].ID[:8], err)
	}
	return match[0].ID, err
}
