// Package wire is the protocol between a coffer repository server
// (internal/reposerver, `coffer repository serve`) and its client store
// (internal/store/remote): the paths, headers and error codes both sides
// must agree on. It is coffer's own protocol, hand-written because it
// carries exactly the store contract (package store): atomic commit of a
// streamed body, conditional writes and retention; no existing object
// protocol (S3, WebDAV, restic's REST) carries all three with per-
// credential rights.
package wire

import (
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"net/http"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
)

// Paths under the server's base URL. An object's name follows
// ObjectsPath verbatim (names are [A-Za-z0-9._-] and "/").
const (
	ObjectsPath    = "/v1/objects/"
	ListPath       = "/v1/list"
	PropertiesPath = "/v1/properties"
	// RetainPath extends an object's lock (POST, RetainUntilHeader).
	RetainPath = "/v1/retain/"
)

// Protocols are the HTTP versions both sides speak: HTTP/1.1 only. Each
// request in flight then has a TLS connection of its own, which the
// kernel and both processes' cores serve in parallel; over HTTP/2 every
// request shared one connection whose frames a single goroutine on each
// side reads, and moving a GiB of packs cost a third more CPU on
// loopback (docs/15-repository-server.md, "Speed through the server").
func Protocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return p
}

// NewCommitSum starts the checksum of a PUT's body that its commit
// trailer carries: CRC-32C. It proves the body arrived whole, as sent;
// TLS already keeps anyone else from changing it on the way, and the
// objects are authenticated by the repository's own encryption, so a
// cryptographic hash would prove nothing more. SHA-256 on both sides
// was half of the CPU a GiB of packs cost the client and the server
// together (docs/15-repository-server.md, "Speed through the server");
// CRC-32C runs in the CPU's own instruction.
func NewCommitSum() hash.Hash32 { return crc32.New(castagnoli) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CommitValue is the trailer's value for sum.
func CommitValue(sum hash.Hash32) string { return fmt.Sprintf("%08x", sum.Sum32()) }

// Headers.
const (
	// VersionHeader carries an object's version (store.ObjectInfo.Version).
	VersionHeader = "X-Coffer-Version"
	// RetainUntilHeader carries a retention end in RFC 3339.
	RetainUntilHeader = "X-Coffer-Retain-Until"
	// CommitTrailer is the trailer that ends a PUT's body: the body's
	// checksum (CommitSum), in hex. The server commits the object only
	// when the trailer arrives and matches, so a client killed mid-body,
	// or a body cut short or garbled, never becomes an object.
	CommitTrailer = "X-Coffer-Commit"
	// ErrorHeader names the store error of a failed request (Code*).
	ErrorHeader = "X-Coffer-Error"
)

// Error codes, one per store sentinel, plus the server's own.
const (
	CodeNotFound           = "not-found"
	CodeExists             = "exists"
	CodePreconditionFailed = "precondition-failed"
	CodePermission         = "permission"
	CodeRetained           = "retained"
	CodeNoSpace            = "no-space"
	CodeInvalidRange       = "invalid-range"
	CodeUnauthenticated    = "unauthenticated"
	CodeInvalid            = "invalid"
	CodeInternal           = "internal"
)

var sentinels = []struct {
	code   string
	err    error
	status int
}{
	{CodeNotFound, store.ErrNotFound, http.StatusNotFound},
	{CodeExists, store.ErrExists, http.StatusPreconditionFailed},
	{CodePreconditionFailed, store.ErrPreconditionFailed, http.StatusPreconditionFailed},
	{CodePermission, store.ErrPermission, http.StatusForbidden},
	{CodeRetained, store.ErrRetained, http.StatusLocked},
	{CodeNoSpace, store.ErrNoSpace, http.StatusInsufficientStorage},
	{CodeInvalidRange, store.ErrInvalidRange, http.StatusRequestedRangeNotSatisfiable},
}

// ErrUnauthenticated is a credential the server does not know (or none).
var ErrUnauthenticated = errors.New("the repository server does not know this credential")

// CodeOf is the code and HTTP status of an error a server answers with.
func CodeOf(err error) (code string, status int) {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.code, s.status
		}
	}
	if errors.Is(err, ErrUnauthenticated) {
		return CodeUnauthenticated, http.StatusUnauthorized
	}
	return CodeInternal, http.StatusInternalServerError
}

// SentinelOf is the store sentinel a client maps a code to (nil if none).
func SentinelOf(code string) error {
	for _, s := range sentinels {
		if s.code == code {
			return s.err
		}
	}
	if code == CodeUnauthenticated {
		return ErrUnauthenticated
	}
	return nil
}

// ListEntry is one line of a listing (newline-delimited JSON). The last
// line has End set, or Error when the listing failed part-way: a client
// that sees neither was cut off and must not take the listing as whole.
type ListEntry struct {
	Name        string    `json:"name,omitempty"`
	Size        int64     `json:"size,omitempty"`
	ModTime     time.Time `json:"mod_time,omitzero"`
	Version     string    `json:"version,omitempty"`
	RetainUntil time.Time `json:"retain_until,omitzero"`
	End         bool      `json:"end,omitempty"`
	Error       string    `json:"error,omitempty"`
	ErrorCode   string    `json:"error_code,omitempty"`
}

// SizeHeader carries an object's size in bytes.
const SizeHeader = "X-Coffer-Size"

// SizeHintHeader carries the size a client expects a PUT's body to have
// (store.PutOptions.SizeHint): the body is chunked, so that its commit
// trailer can follow, and has no Content-Length. The server writes an
// object announced as large (a pack) past its page cache, as the local
// store does. Only a hint: the body's length is what counts.
const SizeHintHeader = "X-Coffer-Size-Hint"

// ModTimeHeader carries an object's modification time in RFC 3339 with
// nanoseconds (Last-Modified has whole seconds only).
const ModTimeHeader = "X-Coffer-Mod-Time"

// Properties is the server's description of its store.
type Properties struct {
	ConditionalWrites bool `json:"conditional_writes"`
	Retention         bool `json:"retention"`
	Connections       int  `json:"connections"`
	// Right is what the caller's credential may do: read, append or
	// maintain.
	Right string `json:"right"`
}
