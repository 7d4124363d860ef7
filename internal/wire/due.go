package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DueMagic starts the due line. No JSON value and no base64 text starts
// with it, and a publisher offloads any body that does (see [Marked]), so
// a body of the user's own never passes for one.
const DueMagic = "azdispatch-due/1 "

// MaxDueLine bounds the line, newline included, that a listener reads: a real
// one is under 100 bytes.
const MaxDueLine = 256

// MaxAfter bounds After: a century, beyond which a due time is a mistake.
const MaxAfter = 100 * 365 * 24 * time.Hour

// ErrBadDueLine is the error of a due line that does not parse or makes no
// sense.
var ErrBadDueLine = errors.New("malformed due line")

// DueLine says when a message is due and how often it was hidden again.
//
// It is the line a message sent to be handled later carries
// before its text: when it is due, and what the listener has done to keep
// it hidden until then.
//
// A queue message can be hidden for at most 7 days. A message due later is
// sent hidden for 7 days with this line first; a listener that receives it
// before it is due hides it again (one Update Message, which rewrites the
// line with the hop counted) instead of handling it. A message due within
// 7 days is hidden by the service alone, and its line (see [DueLine.Kept])
// only says when it is due, for its time in queue. Every decision is
// taken on the service's clock: a due time is either an absolute time the
// sender gave (At) or seconds after the message's insertion time, which
// the service stamps (After).
type DueLine struct {
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
	// hidden again: the deliveries up to then were hops or snoozes, not
	// tries, so a delivery's real count is the service's count less Seen.
	// A snoozed message that was not sent for later has a line with Seen
	// alone, and is due at once.
	Seen int64 `json:"seen,omitempty"`
	// Occ says which occurrence of a schedule the message was sent for,
	// if a scheduler sent it.
	Occ *Occurrence `json:"occ,omitempty"`

	// extra holds the fields of a parsed line that this version does not
	// know, written back as they were when the line is encoded again: a
	// later version's fields survive a hop by this one.
	extra map[string]json.RawMessage
}

// dueFields are the names of the fields DueLine reads.
var dueFields = map[string]bool{"at": true, "after": true, "hops": true, "seen": true, "occ": true}

// Occurrence is the occurrence of a schedule a message was sent for.
type Occurrence struct {
	Schedule string `json:"s"`
	At       int64  `json:"t"` // Unix seconds
	Item     int    `json:"i,omitempty"`
	Late     bool   `json:"late,omitempty"`
	Missed   int64  `json:"missed,omitempty"` // earlier occurrences this one stands for
	RunNow   bool   `json:"now,omitempty"`    // asked for by a run-now, besides the timetable
	// Once names the record that the first listener to deliver the
	// message writes, so that another message of the same occurrence and
	// item is found to be a duplicate: 32 hexadecimal digits.
	Once string `json:"once"`
}

// MaxSchedule bounds an occurrence's schedule name, so that a line stays
// within MaxDueLine.
const MaxSchedule = 64

// Due is when the message is due, for one inserted at inserted (the
// service's insertion time).
func (l *DueLine) Due(inserted time.Time) time.Time {
	if !l.At.IsZero() {
		return l.At
	}
	return inserted.Add(time.Duration(l.After) * time.Second)
}

// Kept reports whether the line's message was kept hidden until it was
// due by the service alone: a delay of at most hop (the service's longest
// hiding), never hidden again. The line then only records when it is due,
// for its time in queue: no listener hides it again, nor looks for a
// cancel record (a cancel of it is a delete).
func (l *DueLine) Kept(hop time.Duration) bool {
	return l.At.IsZero() && l.Occ == nil && l.Hops == 0 && time.Duration(l.After)*time.Second <= hop
}

// Encode returns the line, newline included, to put before a message's
// text, with the fields it was parsed with that this version does not
// know. Its At must be within 1970 to 9999 (a time JSON can carry, and
// CutDue accepts): the publisher refuses others before any request.
func (l *DueLine) Encode() string {
	fields := make(map[string]any, len(l.extra)+4)
	for k, v := range l.extra {
		fields[k] = v
	}
	if !l.At.IsZero() {
		fields["at"] = l.At.UTC()
	}
	if l.Occ != nil {
		fields["occ"] = l.Occ
	}
	for k, v := range map[string]int64{"after": l.After, "hops": l.Hops, "seen": l.Seen} {
		if v != 0 {
			fields[k] = v
		}
	}
	b, err := json.Marshal(fields) // keys sorted: the same line, the same bytes
	if err != nil {
		panic(fmt.Sprintf("wire: a due line that cannot be encoded: %v", err)) // an At out of range: the caller's bug
	}
	return DueMagic + string(b) + "\n"
}

// InRange reports whether t is a due time a line can carry: 1970 to 9999.
func InRange(t time.Time) bool {
	u := t.UTC()
	return u.Year() >= 1970 && u.Year() <= 9999
}

// CutDue splits text into its due line and the rest, byte for byte: the
// first step of [Parse], and all of it that a reader needs who keeps the
// rest as it is (a poison envelope's body, a message hidden again). Text
// without the line gives nil and text unchanged; a line that is too long,
// does not parse, or makes no sense (no due time and no Seen, both kinds, negative
// counts, a delay beyond a century, a time outside 1970 to 9999) gives an
// error matching [ErrBadDueLine], and text unchanged. Fields it does not
// know are kept for [DueLine.Encode], so that a later version may add some.
func CutDue(text string) (*DueLine, string, error) {
	if !strings.HasPrefix(text, DueMagic) {
		return nil, text, nil
	}
	end := strings.IndexByte(text[:min(len(text), MaxDueLine)], '\n')
	if end < 0 {
		return nil, text, fmt.Errorf("%w: no end of line within %d bytes", ErrBadDueLine, MaxDueLine)
	}
	raw := []byte(text[len(DueMagic):end])
	var l DueLine
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, text, fmt.Errorf("%w: %v", ErrBadDueLine, err)
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, text, fmt.Errorf("%w: %v", ErrBadDueLine, err)
	}
	for k, v := range fields {
		// JSON names match DueLine's fields in any case, as Unmarshal did.
		if !dueFields[strings.ToLower(k)] {
			if l.extra == nil {
				l.extra = map[string]json.RawMessage{}
			}
			l.extra[k] = v
		}
	}
	switch {
	case !l.At.IsZero() && l.After != 0:
		return nil, text, fmt.Errorf("%w: it has both \"at\" and \"after\"", ErrBadDueLine)
	case l.At.IsZero() && l.After == 0 && l.Seen == 0:
		// A line with neither is a snoozed message's (see Seen): it is
		// due at once, and only counts its deliveries.
		return nil, text, fmt.Errorf("%w: it needs one of \"at\", \"after\" and \"seen\"", ErrBadDueLine)
	case l.After < 0 || time.Duration(l.After) > MaxAfter/time.Second:
		return nil, text, fmt.Errorf("%w: \"after\" %d is not between 1 s and a century", ErrBadDueLine, l.After)
	case !l.At.IsZero() && !InRange(l.At):
		return nil, text, fmt.Errorf("%w: \"at\" %v is not between 1970 and 9999", ErrBadDueLine, l.At)
	case l.Hops < 0 || l.Seen < 0:
		return nil, text, fmt.Errorf("%w: negative \"hops\" or \"seen\"", ErrBadDueLine)
	case l.Occ != nil && !l.Occ.valid():
		return nil, text, fmt.Errorf("%w: \"occ\" is not an occurrence", ErrBadDueLine)
	}
	return &l, text[end+1:], nil
}

// valid reports whether o makes sense: a schedule name, a time in range,
// counts not negative, and a record name of the right form.
func (o *Occurrence) valid() bool {
	if o.Schedule == "" || len(o.Schedule) > MaxSchedule || o.Item < 0 || o.Missed < 0 ||
		!InRange(time.Unix(o.At, 0)) {
		return false
	}
	return ValidOnce(o.Once)
}

// ValidOnce reports whether name is a once-mark's record name: 32
// lowercase hexadecimal digits, so that a hostile text cannot name another
// blob.
func ValidOnce(name string) bool {
	if len(name) != 32 {
		return false
	}
	for _, c := range name {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
