package queue_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// key is an end key of the form the submitter draws (26 characters of
// base32).
const key = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// TestEndNoticeParsesStrictly: a notice carries an outcome only as
// "<id> <key> <object>" with the ID in its canonical form and the key
// the waiter holds; anything else that names a job is its end alone (its
// waiters read the row), and anything that names none is ignored.
func TestEndNoticeParsesStrictly(t *testing.T) {
	const out = `{"worker": "kvm1", "document": {"point": "p1"}, "transient": true}`
	want := &queue.Outcome{Worker: "kvm1", Document: json.RawMessage(`{"point": "p1"}`), Transient: true}
	for _, c := range []struct {
		payload string
		id      int64 // 0: ignored
		carried bool
	}{
		{"42 " + key + " " + out, 42, true},
		{"42", 42, false},
		{"9223372036854775807", 9223372036854775807, false},
		// Not a job's ID: ignored.
		{"", 0, false},
		{" 42", 0, false},
		{"+42", 0, false},
		{"-42", 0, false},
		{"042 " + key + " " + out, 0, false},
		{"0", 0, false},
		{"9223372036854775808", 0, false},
		{"42\t" + key + " " + out, 0, false},
		{"4 2", 4, false},
		{"forty-two", 0, false},
		// A job's end, with no outcome to believe: the row is read.
		{"42 ", 42, false},
		{"42 " + key, 42, false},
		{"42 " + key + " ", 42, false},
		{"42 " + strings.ToLower(key) + " " + out, 42, false},
		{"42 " + key[1:] + " " + out, 42, false},
		{"42 " + key + "A " + out, 42, false},
		{"42 " + key[:25] + "1 " + out, 42, false},
		{"42 " + key + "  " + out, 42, false},
		{"42 " + key + " null", 42, false},
		{"42 " + key + " []", 42, false},
		{"42 " + key + " \"kvm1\"", 42, false},
		{"42 " + key + " {", 42, false},
		{"42 " + key + " " + out + " {}", 42, false},
		{"42 " + key + " " + out + "x", 42, false},
		{"42 " + key + ` {"worker": 7}`, 42, false},
		{"42 " + key + ` {"document": {]}`, 42, false},
	} {
		id, got, ok := queue.ParseEndNotice(c.payload, key)
		if ok != (c.id != 0) || id != c.id || (got != nil) != c.carried {
			t.Errorf("%q: job %d (named: %v), outcome %+v; want job %d, carried %v", c.payload, id, ok, got, c.id, c.carried)
			continue
		}
		if c.carried && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: outcome %+v, want %+v", c.payload, got, want)
		}
		if _, other, _ := queue.ParseEndNotice(c.payload, strings.Replace(key, "A", "B", 1)); other != nil {
			t.Errorf("%q: an outcome under another key: %+v", c.payload, other)
		}
		if _, none, _ := queue.ParseEndNotice(c.payload, ""); none != nil {
			t.Errorf("%q: an outcome believed without a key: %+v", c.payload, none)
		}
	}
}

// TestEndPayloadCarriesWhatCommitted: the payload of a finalized job with
// an outcome is its ID, its key and its output's bytes as committed; the
// ID alone when there is no key, no end, no outcome, or too long an
// outcome for a NOTIFY.
func TestEndPayloadCarriesWhatCommitted(t *testing.T) {
	now := time.Now()
	const output = `{"error": "x", "worker": "kvm1", "document": {"vms": [1, 2]}}`
	row := func(meta string, finalized *time.Time) *rivertype.JobRow {
		return &rivertype.JobRow{ID: 42, State: rivertype.JobStateCompleted, FinalizedAt: finalized, Metadata: []byte(meta)}
	}
	ended := row(`{"river:log": [], "output": `+output+`}`, &now)
	if got, want := queue.EndPayload(ended, key), "42 "+key+" "+output; got != want {
		t.Fatalf("payload %q, want %q", got, want)
	}
	id, out, ok := queue.ParseEndNotice(queue.EndPayload(ended, key), key)
	if !ok || id != 42 || out == nil || out.Worker != "kvm1" || string(out.Document) != `{"vms": [1, 2]}` {
		t.Fatalf("the payload read back: job %d, %+v", id, out)
	}

	long := `{"worker": "` + strings.Repeat("x", queue.MaxCarried) + `"}`
	for what, c := range map[string]struct {
		row *rivertype.JobRow
		key string
	}{
		"no key":           {ended, ""},
		"not finalized":    {row(`{"output": `+output+`}`, nil), key},
		"no outcome":       {row(`{}`, &now), key},
		"a null outcome":   {row(`{"output": null}`, &now), key},
		"too long":         {row(`{"output": `+long+`}`, &now), key},
		"unreadable":       {row(`{"output": `, &now), key},
		"no metadata":      {row(``, &now), key},
		"not a document":   {row(`{"output": "done"}`, &now), key},
		"a list of things": {row(`{"output": [1]}`, &now), key},
	} {
		if got := queue.EndPayload(c.row, c.key); got != "42" {
			t.Errorf("%s: payload %q, want the ID alone", what, got)
		}
	}
	fits := `{"worker": "` + strings.Repeat("x", queue.MaxCarried-len("42 "+key+" ")-len(`{"worker": ""}`)) + `"}`
	if got := queue.EndPayload(row(`{"output": `+fits+`}`, &now), key); len(got) != queue.MaxCarried {
		t.Fatalf("an outcome of exactly the limit: %d bytes", len(got))
	}
}

// FuzzParseEndNotice: no payload crashes the parser, and what it reads is
// what the payload says: the job its canonical ID names, and an outcome
// only under the key it spells, from a whole JSON object.
func FuzzParseEndNotice(f *testing.F) {
	for _, s := range []string{"42", "42 " + key + ` {"worker": "a"}`, "42 " + key + " null", "+1", "1 2 3", "42 " + key + ` {"document": {}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		id, out, ok := queue.ParseEndNotice(payload, key)
		if !ok {
			if id != 0 || out != nil {
				t.Fatalf("%q names no job, yet job %d, %+v", payload, id, out)
			}
			return
		}
		head, rest, _ := strings.Cut(payload, " ")
		if head != strconv.FormatInt(id, 10) || id <= 0 {
			t.Fatalf("%q read as job %d", payload, id)
		}
		if out == nil {
			return
		}
		k, body, _ := strings.Cut(rest, " ")
		var o queue.Outcome
		if k != key || !strings.HasPrefix(body, "{") || json.Unmarshal([]byte(body), &o) != nil || !reflect.DeepEqual(&o, out) {
			t.Fatalf("%q read as outcome %+v", payload, out)
		}
	})
}
