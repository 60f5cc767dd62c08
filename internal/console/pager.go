package console

import (
	"net/http"
	"net/url"
	"strconv"
)

// pager pages a list the console holds whole: Page is 1-based.
type pager struct {
	Page, Pages int
	Prev, Next  string
}

func pageOf[T any](items []T, r *http.Request, base url.Values, path string) ([]T, pager) {
	n, _ := strconv.Atoi(r.URL.Query().Get("page"))
	pages := max(1, (len(items)+pageSize-1)/pageSize)
	n = min(max(n, 1), pages)
	pg := pager{Page: n, Pages: pages}
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
	lo := (n - 1) * pageSize
	return items[lo:min(len(items), lo+pageSize)], pg
}
