package queue

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// A hand-off's end notice (the NOTIFY on doneChannel) is its job's ID,
// and, when the completion recorded an outcome that fits, the job's end
// key and that outcome: "<id> <key> <output>", output being the job's
// metadata output exactly as the completion's transaction committed it.
// The waiter then returns the outcome without reading the row: one round
// trip, and one wake-up of the leader, less per unit.
//
// The key authenticates the outcome. Any role that can connect may
// NOTIFY the channel, a worker's token included, while a job's row is
// readable only by the servers and by the worker of its queue (policy
// coffer_worker_own_queue). The submitter draws the key at random, puts
// it in the job's arguments (EndKey) and keeps it (Submitted); a waiter
// believes an outcome only under that key. The key is public once its
// notice is sent, but the job has ended then, and the first notice wins.

// maxCarried is the longest payload that carries an outcome: PostgreSQL
// refuses a NOTIFY payload of 8000 bytes or more; the margin covers a
// conversion to another server encoding. Longer, the notice is the ID
// alone and the waiter reads the row.
const maxCarried = 7000

// endKeyLen bounds a key: crypto/rand.Text's 26 characters of base32.
const endKeyLen = 26

// newEndKey draws a job's end key.
func newEndKey() string { return rand.Text() }

// validEndKey: key is a key newEndKey could have drawn.
func validEndKey(key string) bool {
	if len(key) != endKeyLen {
		return false
	}
	for _, r := range key {
		if (r < 'A' || r > 'Z') && (r < '2' || r > '7') {
			return false
		}
	}
	return true
}

// endPayload is the end notice of row, the job as its completion's
// transaction leaves it (River's RETURNING), under key: the ID alone
// unless the row is finalized with an outcome that fits.
func endPayload(row *rivertype.JobRow, key string) string {
	id := strconv.FormatInt(row.ID, 10)
	if key == "" || row.FinalizedAt == nil {
		return id
	}
	var meta struct {
		Output json.RawMessage `json:"output"` // the bytes as committed, not re-encoded
	}
	if err := json.Unmarshal(row.Metadata, &meta); err != nil || len(meta.Output) == 0 || meta.Output[0] != '{' {
		return id
	}
	p := id + " " + key + " " + string(meta.Output)
	if len(p) > maxCarried {
		return id
	}
	return p
}

// endNotice is what a notice tells the waiters of a job: nothing but its
// end (out nil: read the row), or the outcome carried under key.
type endNotice struct {
	key string
	out *Outcome
}

// parseEndNotice reads a notice's payload: ok is false when it names no
// job (it is ignored; Wait's recheck is the safety net). Anything but a
// well-formed outcome under a well-formed key is an end alone: its
// waiters read the row, never an outcome guessed from the payload.
func parseEndNotice(payload string) (id int64, n endNotice, ok bool) {
	head, rest, carried := strings.Cut(payload, " ")
	id, err := strconv.ParseInt(head, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != head {
		return 0, endNotice{}, false
	}
	if !carried {
		return id, endNotice{}, true
	}
	key, output, ok := strings.Cut(rest, " ")
	if !ok || !validEndKey(key) || !strings.HasPrefix(output, "{") {
		return id, endNotice{}, true
	}
	out, err := outcomeOf(id, rivertype.JobStateCompleted, []byte(output), "")
	if err != nil {
		return id, endNotice{}, true
	}
	return id, endNotice{key: key, out: out}, true
}

// outcome is the notice's outcome if it carries one under key (not ""),
// else nil.
func (n endNotice) outcome(key string) *Outcome {
	if key == "" || n.key != key {
		return nil
	}
	return n.out
}

// completeTx is River's JobCompleteTx for job, returning the row as the
// transaction leaves it (for its end notice).
func completeTx[T river.JobArgs](job *river.Job[T]) func(context.Context, pgx.Tx) (*rivertype.JobRow, error) {
	return func(ctx context.Context, tx pgx.Tx) (*rivertype.JobRow, error) {
		done, err := river.JobCompleteTx[riverDriver](ctx, tx, job)
		if err != nil {
			return nil, err
		}
		return done.JobRow, nil
	}
}
