package dashboard

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"

	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// column is one sortable table header: sorting is done on the server,
// through links, so that it works without JavaScript; aria-sort says which
// column the rows are sorted by.
type column struct {
	Label    string
	Href     string // the page sorted by this column (reversed if it already is)
	AriaSort string // "ascending", "descending" or "" (not sorted by it)
	Num      bool   // a number: right-aligned
}

// sortSpec is a table's sort order as a request asks for it, checked
// against the table's columns so that nothing else is ever used.
type sortSpec struct {
	key  string
	desc bool
}

// readSort reads the sort and dir parameters, falling back to def.
func readSort(r *http.Request, keys []string, def sortSpec) sortSpec {
	q := r.URL.Query()
	key := bounded(q.Get("sort"), 20)
	if key == "" || !slices.Contains(keys, key) {
		return def
	}
	return sortSpec{key: key, desc: q.Get("dir") == "desc"}
}

// columns builds the headers of a table on page whose columns are keys
// (labels[i] for keys[i]; an empty key is not sortable), keeping the
// request's other parameters in each link.
func columns(r *http.Request, page string, keys, labels []string, num []bool, cur sortSpec) []column {
	out := make([]column, len(keys))
	for i, k := range keys {
		c := column{Label: labels[i], Num: num[i]}
		if k != "" {
			q := keep(r.URL.Query())
			q.Set("sort", k)
			q.Set("dir", "asc")
			if cur.key == k {
				c.AriaSort = "ascending"
				if cur.desc {
					c.AriaSort = "descending"
				} else {
					q.Set("dir", "desc")
				}
			}
			c.Href = page + "?" + q.Encode()
		}
		out[i] = c
	}
	return out
}

// kept are the parameters a link within a page carries on: filters and
// view choices. Nothing else read from a request is ever written back.
var kept = []string{"reason", "source", "older", "reveal", "view", "price"}

func keep(q url.Values) url.Values {
	out := url.Values{}
	for _, k := range kept {
		if v := bounded(q.Get(k), 200); v != "" {
			out.Set(k, v)
		}
	}
	return out
}

// bounded cuts a value read from a request (or a reason written into a
// link) to at most n bytes, at a character boundary: nothing a client sends
// is held or echoed at any length, and what is cut is still a prefix of the
// same characters, so that a filter made of it matches.
func bounded(s string, n int) string {
	return xmltext.TruncateUTF8(s, n)
}

// byVal compares absent values after present ones, whatever the direction.
func byVal(a, b val, desc bool) int {
	switch {
	case a.OK && !b.OK:
		return -1
	case !a.OK && b.OK:
		return 1
	case !a.OK && !b.OK:
		return 0
	}
	if desc {
		return cmp.Compare(b.N, a.N)
	}
	return cmp.Compare(a.N, b.N)
}

func byString(a, b string, desc bool) int {
	if desc {
		return cmp.Compare(b, a)
	}
	return cmp.Compare(a, b)
}
