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
	// keyCopySuffix names the second copy of every key file: one damaged
	// or deleted copy of a key file must not lock its password out.
	keyCopySuffix = ".copy"
)

// KeyFile is a key (password) of a repository: the master key sealed with a
// key derived from one password. Stored as JSON at keys/<key ID>, and again
// at keys/<key ID>.copy.
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
// edited to say "none" cannot downgrade a repository. Config is an
// authenticated copy of the whole config (absent in key files written
// before it was added): a damaged or deleted config is rebuilt from it.
type keyPayload struct {
	Master     crypto.MasterKey `json:"master"`
	Repository string           `json:"repository"`
	Encryption string           `json:"encryption"`
	Config     *Config          `json:"config,omitempty"`
}

// ErrLastKey refuses to remove the only key of a repository.
var ErrLastKey = errors.New("refusing to remove the last key: the repository would become unreadable")

// ErrKeyInUse refuses to remove the key whose password opened the
// repository: the one removing it (a user, or a server and every schedule
// it runs) would be locked out at its next open.
var ErrKeyInUse = errors.New("refusing to remove the key currently used to access the repository")

// ErrKeyNotFound is returned for a key ID (or prefix) no key has.
var ErrKeyNotFound = errors.New("no such key")

// ErrAmbiguous is returned for an ID prefix several keys or snapshots
// share.
var ErrAmbiguous = errors.New("ambiguous ID prefix")

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

// keyNames are the two objects of a key file.
func keyNames(keyID string) [2]string {
	return [2]string{keysPrefix + keyID, keysPrefix + keyID + keyCopySuffix}
}

// encode is the key file object's bytes: indented JSON.
func (kf *KeyFile) encode() ([]byte, error) { return json.MarshalIndent(kf, "", "  ") }

func saveKeyFile(ctx context.Context, st store.Store, kf *KeyFile) error {
	raw, err := kf.encode()
	if err != nil {
		return err
	}
	for _, name := range keyNames(kf.ID) {
		if _, err := store.Put(ctx, st, name, raw, store.PutOptions{IfNotExists: st.Properties().ConditionalWrites}); err != nil {
			return err
		}
	}
	return nil
}

// keyObjects are the copies of one key file as stored.
type keyObjects struct {
	id     string
	raw    [2][]byte // nil: missing
	parsed [2]*KeyFile
}

// file is the first copy that parses.
func (k *keyObjects) file() *KeyFile {
	if k.parsed[0] != nil {
		return k.parsed[0]
	}
	return k.parsed[1]
}

// readKeyObjects reads every key file object, grouped by key ID, oldest
// key first. A copy that does not parse is kept as raw bytes only.
func readKeyObjects(ctx context.Context, st store.Store) ([]*keyObjects, error) {
	byID := map[string]*keyObjects{}
	err := st.List(ctx, keysPrefix, func(fi store.ObjectInfo) error {
		raw, err := store.Get(ctx, st, fi.Name, 0, -1)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		keyID, isCopy := strings.CutSuffix(strings.TrimPrefix(fi.Name, keysPrefix), keyCopySuffix)
		k := byID[keyID]
		if k == nil {
			k = &keyObjects{id: keyID}
			byID[keyID] = k
		}
		i := 0
		if isCopy {
			i = 1
		}
		k.raw[i] = raw
		var kf KeyFile
		if json.Unmarshal(raw, &kf) == nil && kf.Magic == keyMagic {
			kf.ID = keyID
			k.parsed[i] = &kf
		}
		return nil
	})
	out := make([]*keyObjects, 0, len(byID))
	for _, k := range byID {
		out = append(out, k)
	}
	created := func(k *keyObjects) time.Time {
		if f := k.file(); f != nil {
			return f.Created
		}
		return time.Time{}
	}
	sort.Slice(out, func(i, j int) bool { return created(out[i]).Before(created(out[j])) })
	return out, err
}

func listKeyFiles(ctx context.Context, st store.Store) ([]*KeyFile, error) {
	objs, err := readKeyObjects(ctx, st)
	var out []*KeyFile
	for _, k := range objs {
		if f := k.file(); f != nil {
			out = append(out, f)
		}
	}
	return out, err
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
	cfg := r.cfg
	kf, err := newKeyFile(keyPayload{Master: r.key.Master(), Repository: r.cfg.ID, Encryption: r.cfg.Encryption, Config: &cfg}, password, label, crypto.DefaultKDF())
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
		for _, name := range keyNames(kf.ID) {
			if err := rt.ExtendRetention(ctx, name, until); err != nil {
				return nil, fmt.Errorf("key %s was added but not locked: %w", kf.ID[:8], err)
			}
		}
	}
	return kf, nil
}

// RemoveKey removes a key file by ID or unique prefix. The last key cannot
// be removed, nor the key that opened this session.
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
		return "", fmt.Errorf("%w: no key with ID %q (coffer key list lists them)", ErrKeyNotFound, prefix)
	case len(match) > 1:
		return "", fmt.Errorf("%w: key ID %q matches %d keys: give more of it", ErrAmbiguous, prefix, len(match))
	case len(files) == 1:
		return "", ErrLastKey
	case match[0].ID == r.keyID:
		return "", fmt.Errorf("%w: key %s is the one whose password opened it (through a server, the server's own password); "+
			"to retire it, add another key (coffer key add), open the repository with that key's password instead, then remove this one",
			ErrKeyInUse, short(r.keyID))
	}
	for _, name := range keyNames(match[0].ID) {
		err = r.st.Delete(ctx, name)
		if errors.Is(err, store.ErrRetained) {
			return "", fmt.Errorf("key %s opens immutable backup points and stays as long as they are locked; remove it once its lock has ended: %w", match[0].ID[:8], err)
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
	}
	return match[0].ID, nil
}
