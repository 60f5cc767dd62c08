package catalog

import (
	"context"
	"errors"
	"time"
)

// ConfigObjects are the configuration objects created through the API
// (policies, connections, repositories, notification targets and
// matchers), stored for internal/configobj, which merges them with the
// configuration file and gives them their meaning. The catalog keeps each
// one's spec as an opaque document, with a version for optimistic
// concurrency and who changed it when.
//
// Every change of any object takes the next number of one counter, the
// generation: the object's Version is the generation of its last change.
// So versions only grow, are never reused by an object deleted and
// created again (a stale If-Match cannot match a newer object), and a
// process that remembers the generation it last read knows from one
// number whether anything changed since (ConfigGeneration).
type ConfigObjects interface {
	// ConfigGeneration is the generation of the newest change (0: none
	// ever made).
	ConfigGeneration(ctx context.Context) (int64, error)
	// ListConfigObjects lists every object by kind and name, with the
	// generation read before them: the objects are at least that
	// recent, so a reader that compares generations never misses a
	// change (at worst it reads one twice).
	ListConfigObjects(ctx context.Context) ([]ConfigObject, int64, error)
	// UpdateConfig runs fn in one write transaction, ordered after every
	// other UpdateConfig on the database (every process and server), so
	// fn can read every object, check the configuration they make and
	// write without another writer in between. fn may run more than
	// once (a retried transaction): it must only touch the database and
	// values it recomputes.
	UpdateConfig(ctx context.Context, fn func(ConfigTx) error) error
}

// ConfigTx is a write transaction on the configuration objects.
type ConfigTx interface {
	// ListConfigObjects lists every object by kind and name, and the
	// generation, as this transaction sees them.
	ListConfigObjects(ctx context.Context) ([]ConfigObject, int64, error)
	// CreateConfigObject stores a new object (Kind, Name, Spec, and
	// CreatedBy as its author) and returns it as stored. One that exists
	// is refused with ErrConflict.
	CreateConfigObject(ctx context.Context, o ConfigObject) (ConfigObject, error)
	// UpdateConfigObject replaces the Spec of the object of o's kind and
	// name (UpdatedBy as the author of the change) and returns it as
	// stored. A missing object is ErrNotFound; ifVersion, unless 0, must
	// be the object's Version, or the change is refused with ErrStale.
	UpdateConfigObject(ctx context.Context, o ConfigObject, ifVersion int64) (ConfigObject, error)
	// DeleteConfigObject removes an object and returns it as it was, on
	// the same terms as UpdateConfigObject.
	DeleteConfigObject(ctx context.Context, kind, name string, ifVersion int64) (ConfigObject, error)
	// AppendAudit adds records in the transaction, so that a change and
	// its record are written together or not at all.
	AppendAudit(ctx context.Context, records []AuditRecord) error
}

// ErrStale refuses a change made against a version of an object that is
// no longer the current one (HTTP's If-Match failing).
var ErrStale = errors.New("catalog: the object changed since that version")

// ConfigObject is one stored configuration object.
type ConfigObject struct {
	Kind string // "policy", "connection", ...
	Name string
	// Spec is the object as internal/configobj encodes it (JSON).
	Spec []byte
	// Version is the generation of the object's last change.
	Version   int64
	CreatedAt time.Time
	CreatedBy string
	UpdatedAt time.Time
	UpdatedBy string
}
