package api

import "net/url"

// What the REST API adds to its answers, shared by the server and its
// client.
const (
	// ErrorClassHeader and ErrorHeader carry the error an operation
	// returned together with its document (200: the document describes
	// it), or, as trailers, the end of a download that went wrong.
	ErrorClassHeader = "Coffer-Error-Class"
	ErrorHeader      = "Coffer-Error"
	// NextHeader is on a page of a listing that more items may follow:
	// its value, passed as the listing's after parameter, asks for the
	// next page.
	NextHeader = "Coffer-Next"
)

// EscapeHeader makes a message fit an HTTP header: percent-encoded UTF-8.
func EscapeHeader(s string) string { return url.PathEscape(s) }

// UnescapeHeader reads what EscapeHeader wrote.
func UnescapeHeader(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}
