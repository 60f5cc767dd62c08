package queue

// Heard is the submitter's listener connection a Submitted was taken
// under (0: none): WaitSubmitted trusts the notices only then.
func Heard(s Submitted) uint64 { return s.heard }

// OnEndRead has c tell f of each read of a hand-off's row for its end,
// and whether it had ended. Set it before any Wait.
func OnEndRead(c *Client, f func(id int64, ended bool)) { c.endRead = f }

// ParseEndNotice is parseEndNotice, with the outcome the notice carries
// under key (nil: its waiters read the row).
func ParseEndNotice(payload, key string) (id int64, out *Outcome, ok bool) {
	id, n, ok := parseEndNotice(payload)
	return id, n.outcome(key), ok
}

// EndPayload is endPayload.
var EndPayload = endPayload

// MaxCarried is maxCarried.
const MaxCarried = maxCarried

// OnWatch has c tell f of each waiter that watches a job, which f must
// not block. Set it before any Wait.
func OnWatch(c *Client, f func(id int64)) { c.waiter.watched = f }
