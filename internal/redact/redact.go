// Package redact removes credentials from text that is about to be shown:
// a probe's body, a command's output. The library's own errors leave SAS
// tokens out already; these cover errors of any origin, whose text may
// carry a request URL, a connection string or an Authorization header.
package redact

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// Mark stands in for every value removed.
const Mark = "REDACTED"

// secretPatterns match credentials written as name and value. Each keeps
// its name (group 1) and loses its value. The whole SAS of a connection
// string goes first, then what may stand on its own: an account key, a
// shared-key Authorization header, a SAS signature (raw, or URL-encoded
// inside another value), and other names that hold secrets.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(SharedAccessSignature=)[^;\s"'<>]+`),
	regexp.MustCompile(`(?i)(AccountKey=)[^;\s"'<>]+`),
	regexp.MustCompile(`(?i)(SharedKey(?:Lite)?\s+[^:\s]+:)[^\s"'<>]+`),
	regexp.MustCompile(`(?i)(sig(?:=|%3D))[^&\s;"'<>,]+`),
	regexp.MustCompile(`(?i)\b((?:signature|password|pwd|access_token|token|code)=)[^\s&;"',]+`),
}

// urlPattern finds URLs in text.
var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// Secrets returns s with the value of every credential it recognises
// replaced by Mark.
func Secrets(s string) string {
	for _, p := range secretPatterns {
		s = p.ReplaceAllString(s, "${1}"+Mark)
	}
	return s
}

// URLs returns s with every URL's query, fragment and user information
// removed: a SAS token is a query.
func URLs(s string) string {
	return urlPattern.ReplaceAllStringFunc(s, func(raw string) string {
		// Punctuation that ends a sentence after a URL is not part of it.
		trimmed := strings.TrimRight(raw, ".,;:)]")
		tail := raw[len(trimmed):]
		u, err := url.Parse(trimmed)
		if err != nil {
			if i := strings.IndexAny(trimmed, "?#@"); i >= 0 {
				return trimmed[:i] + tail
			}
			return trimmed + tail
		}
		u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment, u.User = "", false, "", "", nil
		return u.String() + tail
	})
}

// URLError returns err with the URL of the transport error it wraps, if
// any, stripped as URLs strips one: a request's URL may carry a SAS token.
// Anything wrapping the *url.Error is dropped with it; what it wraps (net
// errors, context errors) stays, for errors.Is.
func URLError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	return &url.Error{Op: ue.Op, URL: URLs(ue.URL), Err: ue.Err}
}
