package route

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch/internal/wire"
)

const week = 7 * 24 * time.Hour

func TestForRoundsUpAndCountsOnTheServiceClock(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := For(1500*time.Millisecond, time.Time{}, "k", 0, now, true)
	assert.Equal(t, Route{Delay: 2 * time.Second, Key: "k"}, r, "a delay is never shorter than asked")

	r = For(0, now.Add(90*time.Second+time.Millisecond), "", time.Hour, now, true)
	assert.Equal(t, now.Add(91*time.Second), r.At, "a time rounds up to its second")
	assert.Equal(t, 91*time.Second, r.Delay, "hidden for what remains by the service's clock")
	assert.True(t, r.OwnTTL)
	assert.False(t, r.Line, "the target told its clock: the service's own delay is enough")

	r = For(0, now.Add(time.Minute), "", 0, now, false)
	assert.True(t, r.Line, "the target's clock unknown: a due line lets listeners judge")

	r = For(0, now.Add(-time.Hour), "", 0, now, true)
	assert.Zero(t, r.Delay, "a time past is visible at once")
	assert.Equal(t, now.Add(-time.Hour), r.At)

	far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, wire.MaxAfter, For(0, far, "", 0, now, true).Delay, "a wait longer than a Duration holds is capped")
}

func TestDueLineAndHops(t *testing.T) {
	p := Policy{Hop: week}
	at := time.Unix(2_000_000_000, 0).UTC()
	occ := &wire.Occurrence{Schedule: "s", At: at.Unix()}
	tests := []struct {
		name string
		p    Policy
		r    Route
		hops bool
		line *wire.DueLine
	}{
		{"now", p, Route{}, false, nil},
		{"within the hop", p, Route{Delay: time.Hour}, false, &wire.DueLine{After: 3600}},
		{"within the hop, plain", Policy{Hop: week, Plain: true}, Route{Delay: time.Hour}, false, nil},
		{"beyond the hop", p, Route{Delay: week + time.Second}, true, &wire.DueLine{After: int64((week + time.Second) / time.Second)}},
		{"at, beyond the hop", p, Route{Delay: 2 * week, At: at}, true, &wire.DueLine{At: at}},
		{"at, clock unknown", p, Route{Delay: time.Minute, At: at, Line: true}, true, &wire.DueLine{At: at}},
		{"an occurrence", Policy{Hop: week, Plain: true}, Route{At: at, Occ: occ}, true, &wire.DueLine{At: at, Occ: occ}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.hops, tt.p.Hops(tt.r))
			assert.Equal(t, tt.line, tt.p.DueLine(tt.r))
		})
	}
}

func TestTTLCountsFromTheDueTime(t *testing.T) {
	inserted := time.Unix(1_000_000, 0)
	tests := []struct {
		name    string
		p       Policy
		r       Route
		ttl     time.Duration
		expires int64
	}{
		{"the service's default", Policy{Hop: week}, Route{}, 0, inserted.Add(DefaultTTL).Unix()},
		{"the publisher's", Policy{Hop: week, TTL: time.Hour}, Route{}, time.Hour, inserted.Add(time.Hour).Unix()},
		{"never", Policy{Hop: week, TTL: -1}, Route{Delay: time.Hour}, -1, 0},
		{"the send's own", Policy{Hop: week, TTL: time.Hour}, Route{TTL: time.Minute, OwnTTL: true}, time.Minute, inserted.Add(time.Minute).Unix()},
		{"delayed: past its due time", Policy{Hop: week}, Route{Delay: time.Hour}, time.Hour + DefaultTTL, inserted.Add(time.Hour + DefaultTTL).Unix()},
		{"beyond 68 years: never", Policy{Hop: week}, Route{Delay: wire.MaxAfter}, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.ttl, tt.p.TTLOf(tt.r))
			assert.Equal(t, tt.expires, tt.p.Expires(tt.r, inserted))
		})
	}
	now := time.Unix(5_000, 0)
	assert.Equal(t, now.Add(DefaultTTL), Policy{}.BlobExpires(Route{}, now))
	assert.Equal(t, now.Add(time.Hour), Policy{TTL: time.Hour}.BlobExpires(Route{}, now))
	assert.True(t, Policy{TTL: -1}.BlobExpires(Route{}, now).IsZero(), "a message that never expires keeps its blob")
}
