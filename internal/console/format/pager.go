package format

import (
	"net/http"
	"net/url"
	"strconv"
)

// Pager pages a list the console holds whole: Page is 1-based.
type Pager struct {
	Page, Pages int
	Prev, Next  string
}

// PageOf is the page of items (size to a page) that the request asks
// for, and the links to the pages beside it.
func PageOf[T any](items []T, size int, r *http.Request, base url.Values, path string) ([]T, Pager) {
	n, _ := strconv.Atoi(r.URL.Query().Get("page"))
	pages := max(1, (len(items)+size-1)/size)
	n = min(max(n, 1), pages)
	pg := Pager{Page: n, Pages: pages}
	link := func(k int) string {
		q := url.Values{}
		for key, v := range base {
			q[key] = v
		}
		q.Set("page", strconv.Itoa(k))
		return path + "?" + q.Encode()
	}
	if n > 1 {
		pg.Prev = link(n - 1)
	}
	if n < pages {
		pg.Next = link(n + 1)
	}
	lo := (n - 1) * size
	return items[lo:min(len(items), lo+size)], pg
}
