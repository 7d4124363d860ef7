package main

import (
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/azdispatch/azdispatch/internal/redact"
)

// redacted stands in for every secret removed from a message.
const redacted = redact.Mark

// redactor removes secrets from text before it is printed: those
// internal/redact recognises, and the exact credentials this run read (connection strings and
// their parts), in case a library echoes one in a shape no pattern knows.
// It is safe for concurrent use.
type redactor struct {
	mu    sync.Mutex
	known []string // longest first, so that a part never hides its whole
}

// add registers a connection string (or any secret) read by this run, with
// the values of its AccountKey and SharedAccessSignature, raw and
// URL-encoded.
func (r *redactor) add(secret string) {
	secret = strings.TrimSpace(secret)
	if secret == "" {
		return
	}
	vals := []string{secret}
	for _, part := range strings.Split(secret, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || v == "" {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "accountkey", "sharedaccesssignature":
			vals = append(vals, v)
			if q, err := url.ParseQuery(strings.TrimPrefix(v, "?")); err == nil {
				if sig := q.Get("sig"); sig != "" {
					vals = append(vals, sig, url.QueryEscape(sig))
				}
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range vals {
		// Very short values would redact ordinary words; the patterns
		// still cover them in their usual places.
		if len(v) >= 8 {
			r.known = append(r.known, v, url.QueryEscape(v))
		}
	}
	sort.Slice(r.known, func(i, j int) bool { return len(r.known[i]) > len(r.known[j]) })
}

// redact returns s without any secret it knows of.
func (r *redactor) redact(s string) string {
	r.mu.Lock()
	known := r.known
	r.mu.Unlock()
	for _, k := range known {
		s = strings.ReplaceAll(s, k, redacted)
	}
	return redact.Secrets(s)
}
