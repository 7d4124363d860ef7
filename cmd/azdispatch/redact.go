package main

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// redacted stands in for every secret removed from a message.
const redacted = "REDACTED"

// secretPatterns match the credentials that can appear in a connection
// string or a URL whatever their value: a SAS signature (in a query, or
// URL-encoded inside another value), an account key, a whole SAS, and a
// shared-key Authorization header. Each keeps its name and loses its value.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(sig(?:=|%3D))[^&\s;"'<>]+`),
	regexp.MustCompile(`(?i)(AccountKey=)[^;\s"'<>]+`),
	regexp.MustCompile(`(?i)(SharedAccessSignature=)[^;\s"'<>]+`),
	regexp.MustCompile(`(?i)(SharedKey(?:Lite)?\s+[^:\s]+:)[^\s"'<>]+`),
}

// redactor removes secrets from text before it is printed: the patterns
// above, and the exact credentials this run read (connection strings and
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
	for _, p := range secretPatterns {
		s = p.ReplaceAllString(s, "${1}"+redacted)
	}
	return s
}
