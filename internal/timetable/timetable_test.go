package timetable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/cron"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func times(p Plan) []time.Time {
	var ts []time.Time
	for _, o := range p.Send {
		ts = append(ts, o.At)
	}
	return ts
}

func TestAWakeOnTimeSendsTheOccurrenceDue(t *testing.T) {
	t.Parallel()
	every := Every(time.Minute)
	p := Decide(t0, t0.Add(2*time.Second), every, One, 10, 30*time.Second)
	require.Equal(t, []Occurrence{{At: t0}}, p.Send)
	assert.Equal(t, t0.Add(time.Minute), p.Next)
	assert.Zero(t, p.Skipped)
}

func TestAWakeBeforeTheOccurrenceSendsNothing(t *testing.T) {
	t.Parallel()
	p := Decide(t0, t0.Add(-time.Second), Every(time.Minute), One, 10, time.Minute)
	assert.Empty(t, p.Send)
	assert.Equal(t, t0, p.Next)
}

func TestMissedOccurrencesByPolicy(t *testing.T) {
	t.Parallel()
	every := Every(time.Minute)
	// Down for 10 minutes and 5 s: t0..t0+10m are due, only the last is within the grace.
	now := t0.Add(10*time.Minute + 5*time.Second)
	grace := 30 * time.Second

	one := Decide(t0, now, every, One, 3, grace)
	assert.Equal(t, []Occurrence{{At: t0.Add(9 * time.Minute), Late: true, Missed: 9}, {At: t0.Add(10 * time.Minute)}}, one.Send)
	assert.EqualValues(t, 9, one.Skipped)
	assert.Equal(t, t0.Add(11*time.Minute), one.Next)

	skip := Decide(t0, now, every, Skip, 3, grace)
	assert.Equal(t, []time.Time{t0.Add(10 * time.Minute)}, times(skip))
	assert.EqualValues(t, 10, skip.Skipped)

	each := Decide(t0, now, every, Each, 3, grace)
	assert.Equal(t, []Occurrence{
		{At: t0.Add(7 * time.Minute), Late: true, Missed: 7},
		{At: t0.Add(8 * time.Minute), Late: true},
		{At: t0.Add(9 * time.Minute), Late: true},
		{At: t0.Add(10 * time.Minute)},
	}, each.Send)
	assert.EqualValues(t, 7, each.Skipped)
}

func TestAScheduleThatEndsHasNoNext(t *testing.T) {
	t.Parallel()
	once := func(after time.Time) time.Time {
		if after.Before(t0) {
			return t0
		}
		return time.Time{}
	}
	p := Decide(t0, t0.Add(time.Second), once, One, 10, time.Minute)
	assert.Equal(t, []time.Time{t0}, times(p))
	assert.True(t, p.Next.IsZero())
}

func TestAVeryLongOutageIsCountedNotWalked(t *testing.T) {
	t.Parallel()
	now := t0.Add(30*24*time.Hour + 500*time.Millisecond)
	grace := 30 * time.Second
	due := int64(30*24*3600 + 1) // t0 to now, both ends
	for _, policy := range []Misfire{One, Skip, Each} {
		p := Decide(t0, now, Every(time.Second), policy, 5, grace)
		assert.Equal(t, now.Truncate(time.Second).Add(time.Second), p.Next)
		var late, onTime []Occurrence
		for _, o := range p.Send {
			if o.Late {
				late = append(late, o)
			} else {
				onTime = append(onTime, o)
			}
		}
		require.Len(t, onTime, 30, "the occurrences within the grace, policy %d", policy)
		assert.Equal(t, now.Truncate(time.Second), onTime[29].At)
		missed := due - 30
		assert.Equal(t, missed, p.Skipped+int64(len(late)), "every missed one counted, policy %d", policy)
		switch policy {
		case One:
			require.Len(t, late, 1)
			assert.Equal(t, now.Truncate(time.Second).Add(-30*time.Second), late[0].At, "the latest missed")
			assert.Equal(t, missed-1, late[0].Missed)
		case Each:
			require.Len(t, late, 5)
			assert.Equal(t, now.Truncate(time.Second).Add(-30*time.Second), late[4].At)
		case Skip:
			assert.Empty(t, late)
		}
	}
}

func TestEveryIsTheSameGridEverywhere(t *testing.T) {
	t.Parallel()
	e := Every(2 * time.Second)
	assert.Equal(t, t0.Add(2*time.Second), e(t0))
	assert.Equal(t, t0.Add(2*time.Second), e(t0.Add(1500*time.Millisecond)))
	assert.Equal(t, time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC), Every(time.Hour)(t0.Add(time.Minute)))
}

func TestJitterIsStableAndWithinItsSpread(t *testing.T) {
	t.Parallel()
	for i := range 100 {
		at := t0.Add(time.Duration(i) * time.Minute)
		j := Jitter("report", at, 10*time.Second)
		assert.GreaterOrEqual(t, j, time.Duration(0))
		assert.Less(t, j, 10*time.Second)
		assert.Equal(t, j, Jitter("report", at, 10*time.Second))
	}
	assert.Zero(t, Jitter("report", t0, 0))
}

func TestStateRoundTrips(t *testing.T) {
	t.Parallel()
	s := State{Name: "n", Spec: "every 2s", Next: t0, Last: t0.Add(-2 * time.Second), LastBy: "a", Sent: 3, ClaimBy: "b"}
	got, err := DecodeState(s.Encode())
	require.NoError(t, err)
	assert.Equal(t, s, *got)
	_, err = DecodeState([]byte("{"))
	assert.Error(t, err)
}

func TestTheLatestMissedAreFoundWhenSpacingIsIrregular(t *testing.T) {
	t.Parallel()
	hours, err := cron.Parse("* 9-16 * * 1-5") // every minute of working hours
	require.NoError(t, err)
	nextOf := func(after time.Time) time.Time { return hours.Next(after, time.UTC) }
	start := nextOf(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) // Monday 2 March, 09:00
	now := time.Date(2026, 4, 5, 12, 0, 0, 0, time.UTC)           // a Sunday, five weeks on
	friday := time.Date(2026, 4, 3, 16, 59, 0, 0, time.UTC)       // the latest occurrence before it
	due := int64(25 * 8 * 60)                                     // 25 working days of 480 minutes
	one := Decide(start, now, nextOf, One, 3, time.Minute)
	require.Len(t, one.Send, 1)
	assert.Equal(t, friday, one.Send[0].At)
	assert.InEpsilon(t, due, one.Skipped+1, 0.1, "an estimate beyond the walk")
	assert.Equal(t, time.Date(2026, 4, 6, 9, 0, 0, 0, time.UTC), one.Next)

	each := Decide(start, now, nextOf, Each, 3, time.Minute)
	require.Len(t, each.Send, 3)
	assert.Equal(t, []time.Time{friday.Add(-2 * time.Minute), friday.Add(-time.Minute), friday}, times(each))
}

func TestAWakeSendsAtMostMaxSendOnTimeAndTheRestNext(t *testing.T) {
	t.Parallel()
	every := Every(time.Second)
	now := t0.Add(24 * time.Hour)
	p := Decide(t0.Add(time.Second), now, every, One, 10, 4*time.Hour)
	require.Len(t, p.Send, 1+maxSend, "the catch-up and the first on time")
	assert.True(t, p.Send[0].Late)
	firstOnTime := now.Add(-4 * time.Hour)
	assert.Equal(t, firstOnTime, p.Send[1].At)
	assert.Equal(t, firstOnTime.Add(maxSend*time.Second), p.Next, "the rest at the next wake")
	rest := Decide(p.Next, now, every, One, 10, 4*time.Hour)
	assert.Len(t, rest.Send, maxSend)
	assert.False(t, rest.Send[0].Late)
	assert.Zero(t, rest.Skipped)
}

func TestAnEndedPauseLeavesNoOccurrenceInItOnTime(t *testing.T) {
	p := Pause{Since: t0, Until: t0.Add(9 * time.Second)}
	assert.True(t, p.Holds(t0.Add(8*time.Second)))
	assert.False(t, p.Holds(t0.Add(9*time.Second)))
	assert.Equal(t, 30*time.Second, Pause{}.Grace(t0, 30*time.Second), "no pause: the grace")
	now := t0.Add(10 * time.Second)
	grace := p.Grace(now, 30*time.Second)
	assert.Equal(t, time.Second, grace, "the time since its end")
	plan := Decide(t0.Add(2*time.Second), now, Every(2*time.Second), Skip, 10, grace)
	assert.Equal(t, []Occurrence{{At: t0.Add(10 * time.Second)}}, plan.Send, "12:00:02 to :08 fell in it; :10 is after it")
	assert.EqualValues(t, 4, plan.Skipped)
	assert.Zero(t, p.Grace(t0.Add(5*time.Second), 30*time.Second), "never below zero")
}
