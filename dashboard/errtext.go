package dashboard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/redact"
	"github.com/azdispatch/azdispatch/internal/sasperm"
)

// cleanError is an error's text as a page may show it: what failed, never
// where. A storage error says its operation, its queue (or blob), and the
// service's status and code; a transport error only its kind ("connection
// refused", "timed out", "host not found"), since its text names the host,
// the port and the URL (whose query may be a SAS). Any other text has URLs,
// addresses and credentials taken out.
func cleanError(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.FieldsFunc(describe(err, 0), func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}

// maxErrorDepth bounds the walk down an error's chain.
const maxErrorDepth = 32

// describe is cleanError without the final joining of lines.
func describe(err error, depth int) string {
	switch {
	case err == nil:
		return ""
	case depth > maxErrorDepth:
		return "failed"
	case !located(err):
		return scrub(err.Error())
	}
	if se, ok := err.(*azdispatch.StorageError); ok {
		return storageText(se, depth)
	}
	if transport(err) {
		return errorClass(err)
	}
	// A wrapper of a storage or transport error: its own words, with each
	// wrapped error's text (which fmt.Errorf and errors.Join copy into it)
	// replaced by that error described.
	var kids []error
	switch x := err.(type) {
	case interface{ Unwrap() []error }:
		kids = x.Unwrap()
	case interface{ Unwrap() error }:
		kids = []error{x.Unwrap()}
	}
	text := err.Error()
	var said []string
	for _, k := range kids {
		if k == nil {
			continue
		}
		kt := k.Error()
		i := strings.Index(text, kt)
		if kt == "" || i < 0 {
			// Worded otherwise: say what the wrapped errors are, alone.
			var parts []string
			for _, k := range kids {
				if k != nil {
					parts = append(parts, describe(k, depth+1))
				}
			}
			return strings.Join(parts, "; ")
		}
		mark := "\x00" + strconv.Itoa(len(said)) + "\x00"
		text = text[:i] + mark + text[i+len(kt):]
		said = append(said, describe(k, depth+1))
	}
	text = scrub(text)
	for i, s := range said {
		text = strings.Replace(text, "\x00"+strconv.Itoa(i)+"\x00", s, 1)
	}
	return text
}

// located reports whether err's chain holds an error whose text may say
// where storage is: a storage error, or a transport's.
func located(err error) bool {
	var se *azdispatch.StorageError
	if errors.As(err, &se) {
		return true
	}
	found := false
	walk(err, func(e error) bool {
		found = transport(e)
		return !found
	})
	return found
}

// walk calls fn for err and every error it wraps, depth first, until fn
// returns false.
func walk(err error, fn func(error) bool) bool {
	var rec func(error, int) bool
	rec = func(e error, depth int) bool {
		if e == nil || depth > maxErrorDepth {
			return true
		}
		if !fn(e) {
			return false
		}
		switch x := e.(type) {
		case interface{ Unwrap() []error }:
			for _, k := range x.Unwrap() {
				if !rec(k, depth+1) {
					return false
				}
			}
		case interface{ Unwrap() error }:
			return rec(x.Unwrap(), depth+1)
		}
		return true
	}
	return rec(err, 0)
}

// transport reports whether err itself is one whose text names a host, a
// port, an address or a URL.
func transport(err error) bool {
	switch err.(type) {
	case *url.Error, *net.OpError, *net.DNSError, *net.AddrError, *net.ParseError, *azcore.ResponseError,
		*tls.CertificateVerificationError, *tls.RecordHeaderError, x509.HostnameError, x509.UnknownAuthorityError,
		x509.CertificateInvalidError, *x509.HostnameError, *x509.UnknownAuthorityError, *x509.CertificateInvalidError:
		return true
	}
	return false
}

// errorClass is the kind of a transport error, in a few words.
func errorClass(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if code == "" {
			code = http.StatusText(re.StatusCode)
		}
		s := strconv.Itoa(re.StatusCode) + " " + code
		if c := statusClass(re.StatusCode, re.ErrorCode); c != "" && !strings.EqualFold(c, code) {
			s += " (" + c + ")"
		}
		return s
	}
	var dns *net.DNSError
	var ne net.Error
	var cve *tls.CertificateVerificationError
	var rhe tls.RecordHeaderError
	var ae tls.AlertError
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.As(err, &dns):
		switch {
		case dns.IsNotFound:
			return "host not found"
		case dns.IsTimeout:
			return "timed out"
		}
		return "name lookup failed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "network unreachable"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.As(err, &cve), errors.As(err, &rhe), errors.As(err, &ae):
		return "TLS failed"
	}
	var he x509.HostnameError
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	if errors.As(err, &he) || errors.As(err, &ua) || errors.As(err, &ci) {
		return "TLS failed"
	}
	return "network error"
}

// statusClass is what a storage status means, in a word or two.
func statusClass(status int, code string) string {
	switch {
	case code == "ServerBusy" || status == http.StatusTooManyRequests:
		return "throttled"
	case code == "OperationTimedOut" || status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return "timed out"
	case status == http.StatusUnauthorized:
		return "not authorized"
	case status == http.StatusForbidden:
		return "forbidden"
	case status == http.StatusNotFound:
		return "not found"
	case status == http.StatusConflict:
		return "conflict"
	case status == http.StatusServiceUnavailable:
		return "unavailable"
	case status >= 500:
		return "server error"
	case status >= 400:
		return "refused"
	}
	return ""
}

// storageText describes a storage error: its operation and what it was on,
// and the service's answer, or the kind of failure when none came.
func storageText(se *azdispatch.StorageError, depth int) string {
	on := ""
	switch {
	case se.Blob != "":
		on = fmt.Sprintf(" on blob %q", se.Blob)
	case se.Queue != "":
		on = fmt.Sprintf(" on queue %q", se.Queue)
	}
	op := string(se.Op)
	if op == "" {
		op = "request"
	}
	if se.StatusCode == 0 {
		what := "failed"
		if se.Err != nil {
			what = describe(se.Err, depth+1)
		}
		return fmt.Sprintf("%s%s: %s", op, on, what)
	}
	code := se.Code
	if code == "" {
		code = http.StatusText(se.StatusCode)
	}
	s := fmt.Sprintf("%s%s: %d %s", op, on, se.StatusCode, scrub(code))
	if c := statusClass(se.StatusCode, se.Code); c != "" && !strings.EqualFold(c, code) {
		s += " (" + c + ")"
	}
	var resp *http.Response
	var message string
	var re *azcore.ResponseError
	if errors.As(se.Err, &re) && re.RawResponse != nil {
		resp, message = re.RawResponse, re.Error()
	}
	return s + sasperm.Explain(op, se.StatusCode, se.Code, message, resp)
}

// What scrub takes out of an error's own words.
var (
	urlPattern      = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
	secretPattern   = regexp.MustCompile(`[A-Za-z_]+(?:=|%3[dD]|:)` + redact.Mark)
	keyPattern      = regexp.MustCompile(`[A-Za-z0-9+/]{40,}(?:={1,2}|%3[dD]){0,2}`)
	ipv6Pattern     = regexp.MustCompile(`\[[0-9A-Fa-f:.%a-zA-Z]*:[0-9A-Fa-f:.%a-zA-Z]*\](?::\d+)?`)
	ipv4Pattern     = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b`)
	hostPortPattern = regexp.MustCompile(`\b(?:localhost|[A-Za-z][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*):\d{1,5}\b`)
	hostPattern     = regexp.MustCompile(`\b(?:[a-z0-9-]+\.){2,}[a-z]{2,}\b`)
)

// scrub takes out of text every URL, network address, host name and
// credential it recognises.
func scrub(text string) string {
	s := redact.Secrets(text)
	s = secretPattern.ReplaceAllString(s, "(secret)")
	s = urlPattern.ReplaceAllString(s, "(URL)")
	s = ipv6Pattern.ReplaceAllString(s, "(address)")
	s = ipv4Pattern.ReplaceAllString(s, "(address)")
	s = hostPortPattern.ReplaceAllString(s, "(address)")
	s = hostPattern.ReplaceAllString(s, "(host)")
	return keyPattern.ReplaceAllString(s, "(secret)")
}
