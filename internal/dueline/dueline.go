// Package dueline is the line a message sent to be handled later carries
// before its text: when it is due, and what the listener has done to keep
// it hidden until then.
//
// A queue message can be hidden for at most 7 days. A message due later is
// sent hidden for 7 days with this line first; a listener that receives it
// before it is due hides it again (one Update Message, which rewrites the
// line with the hop counted) instead of handling it. Every decision is
// taken on the service's clock: a due time is either an absolute time the
// sender gave (At) or seconds after the message's insertion time, which
// the service stamps (After).
package dueline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Magic starts the line. No JSON value and no base64 text starts with it,
// and a publisher offloads any body that does, so a body of the user's own
// never passes for one.
const Magic = "azdispatch-due/1 "

// MaxLine bounds the line, newline included, that a listener reads: a real
// one is under 100 bytes.
const MaxLine = 256

// maxAfter bounds After: a century, beyond which a due time is a mistake.
const maxAfter = 100 * 365 * 24 * time.Hour

// ErrMalformed is the error of a line that does not parse or makes no sense.
var ErrMalformed = errors.New("malformed due line")

// Line says when a message is due and how often it was hidden again.
type Line struct {
	// At is the due time the sender named, in UTC to the second; zero if
	// After says it instead.
	At time.Time `json:"at,omitzero"`
	// After is the due time as seconds after the message's insertion
	// time: a delay, counted on the service's clock from when the
	// service took the message.
	After int64 `json:"after,omitempty"`
	// Hops is how many times a listener hid the message again because it
	// was not due yet.
	Hops int64 `json:"hops,omitempty"`
	// Seen is the service's dequeue count of the message when it was last
	// hidden again: the deliveries up to then were hops, not tries, so a
	// delivery's real count is the service's count less Seen.
	Seen int64 `json:"seen,omitempty"`
}

// Due is when the message is due, for one inserted at inserted (the
// service's insertion time).
func (l *Line) Due(inserted time.Time) time.Time {
	if !l.At.IsZero() {
		return l.At
	}
	return inserted.Add(time.Duration(l.After) * time.Second)
}

// Encode returns the line, newline included, to put before a message's text.
func (l *Line) Encode() string {
	c := *l
	if !c.At.IsZero() {
		c.At = c.At.UTC()
	}
	b, _ := json.Marshal(&c) // a struct of a time and integers always marshals
	return Magic + string(b) + "\n"
}

// Has reports whether text starts with a due line.
func Has(text string) bool { return strings.HasPrefix(text, Magic) }

// Parse splits text into its due line and the rest. Text without the line
// gives nil and text unchanged; a line that is too long, does not parse,
// or makes no sense (no due time, both kinds, negative counts, a delay
// beyond a century, a time outside 1970 to 9999) gives an error matching ErrMalformed. Fields it does
// not know are ignored, so that a later version may add some.
func Parse(text string) (*Line, string, error) {
	if !Has(text) {
		return nil, text, nil
	}
	end := strings.IndexByte(text[:min(len(text), MaxLine)], '\n')
	if end < 0 {
		return nil, text, fmt.Errorf("%w: no end of line within %d bytes", ErrMalformed, MaxLine)
	}
	var l Line
	if err := json.Unmarshal([]byte(text[len(Magic):end]), &l); err != nil {
		return nil, text, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case l.At.IsZero() == (l.After == 0):
		return nil, text, fmt.Errorf("%w: it needs one of \"at\" and \"after\"", ErrMalformed)
	case l.After < 0 || time.Duration(l.After) > maxAfter/time.Second:
		return nil, text, fmt.Errorf("%w: \"after\" %d is not between 1 s and a century", ErrMalformed, l.After)
	case !l.At.IsZero() && (l.At.Year() < 1970 || l.At.UTC().Year() > 9999):
		return nil, text, fmt.Errorf("%w: \"at\" %v is not between 1970 and 9999", ErrMalformed, l.At)
	case l.Hops < 0 || l.Seen < 0:
		return nil, text, fmt.Errorf("%w: negative \"hops\" or \"seen\"", ErrMalformed)
	}
	return &l, text[end+1:], nil
}
