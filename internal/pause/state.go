// Package pause is a queue's pause as its metadata keeps it, and the gate
// a listener's receives pass through: it reads the pause again at most once
// per interval, and judges its expiry on the service's clock.
package pause

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// MetadataName is the queue metadata entry that holds a pause. Metadata
// names must be identifiers; the service keeps them as given and answers
// them in whatever case the HTTP stack makes, so Find looks for it in any
// case.
const MetadataName = wire.PauseEntry

// MaxBy bounds who paused (PauseOptions.By), in bytes: the whole entry,
// escaped, then stays well under the 8 KiB the service allows a queue's
// metadata.
const MaxBy = 256

// MaxFor bounds a pause's duration: a hundred years is for good, and
// the end of a longer one does not fit a time.Duration from now.
const MaxFor = 100 * 365 * 24 * time.Hour

// maxValue bounds the entry a reader parses: anything longer was not
// written by Render.
const maxValue = 3*MaxBy + 128

// State is a queue's pause: until when, since when and by whom, on the
// service's clock. The zero State is a queue that is not paused.
type State struct {
	Since, Until time.Time
	By           string
}

// EndOf is when a pause for d from now ends, now being the service's time
// as a client knows it: a lower bound, up to a second behind, since the
// service tells its time to the second. It is rounded up to the second,
// as the pause is kept, from a second past now, so that the pause lasts at
// least d on the service's clock, and at most two seconds more.
func EndOf(now time.Time, d time.Duration) time.Time {
	return now.Add(d + 2*time.Second - 1).Truncate(time.Second)
}

// ActiveAt reports whether the pause holds at now, a time on the service's
// clock.
func (s State) ActiveAt(now time.Time) bool { return !s.Until.IsZero() && now.Before(s.Until) }

// Render is the metadata value of s: a query string, so that a name of
// any script travels as the ASCII a header needs.
func (s State) Render() string {
	v := url.Values{}
	v.Set("until", s.Until.UTC().Format(time.RFC3339))
	v.Set("since", s.Since.UTC().Format(time.RFC3339))
	if s.By != "" {
		v.Set("by", s.By)
	}
	return v.Encode()
}

// ErrMalformed is what Parse returns for an entry Render did not write.
var ErrMalformed = errors.New("malformed pause entry")

// Parse reads a metadata value Render wrote.
func Parse(value string) (State, error) {
	if len(value) > maxValue {
		return State{}, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(value), maxValue)
	}
	v, err := url.ParseQuery(value)
	if err != nil {
		return State{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var s State
	if s.Until, err = time.Parse(time.RFC3339, v.Get("until")); err != nil {
		return State{}, fmt.Errorf("%w: until: %q", ErrMalformed, clip(v.Get("until")))
	}
	if since := v.Get("since"); since != "" {
		if s.Since, err = time.Parse(time.RFC3339, since); err != nil {
			return State{}, fmt.Errorf("%w: since: %q", ErrMalformed, clip(since))
		}
	}
	if s.By = v.Get("by"); len(s.By) > MaxBy {
		return State{}, fmt.Errorf("%w: by: %d bytes, more than %d", ErrMalformed, len(s.By), MaxBy)
	}
	return s, nil
}

// clip bounds what an error quotes of a hostile value.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Find returns the pause entry among a queue's metadata, whatever the case
// of its name, and whether there is one.
func Find(metadata map[string]*string) (string, bool) {
	for k, v := range metadata {
		if v != nil && strings.EqualFold(k, MetadataName) {
			return *v, true
		}
	}
	return "", false
}

// Read returns the pause a queue's metadata holds: the zero State if none.
func Read(metadata map[string]*string) (State, error) {
	v, ok := Find(metadata)
	if !ok {
		return State{}, nil
	}
	return Parse(v)
}

// With returns a copy of metadata with the pause entry set to s, or
// removed if s is the zero State, and every other entry as it was: the
// service replaces a queue's metadata whole.
func With(metadata map[string]*string, s State) map[string]*string {
	out := make(map[string]*string, len(metadata)+1)
	for k, v := range metadata {
		if !strings.EqualFold(k, MetadataName) {
			out[k] = v
		}
	}
	if s != (State{}) {
		v := s.Render()
		out[MetadataName] = &v
	}
	return out
}
