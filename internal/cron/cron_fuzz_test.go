package cron

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzParse feeds Parse any text, as a schedule's configuration might hold.
// What it accepts parses again from its String to the same schedule, and
// its next occurrence is after the time asked, on a whole minute, and
// matches the expression.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/7 3-5 1,15 JAN-MAR MON", "0 0 29 2 *", "5/20 * * * 7", "1-2,4 * * * *"} {
		f.Add(s, int64(1795000000))
	}
	f.Fuzz(func(t *testing.T, expr string, unix int64) {
		s, err := Parse(expr)
		if err != nil {
			return
		}
		again, err := Parse(s.String())
		require.NoError(t, err)
		require.Equal(t, s.minute, again.minute)
		require.Equal(t, s.dow, again.dow)
		from := time.Unix(unix%(4e9), 0).UTC()
		next := s.Next(from, nil)
		if next.IsZero() {
			return
		}
		require.True(t, next.After(from))
		require.Zero(t, next.Second())
		require.NotZero(t, s.minute&(1<<next.Minute()))
		require.NotZero(t, s.hour&(1<<next.Hour()))
		require.True(t, s.matchDay(time.Date(next.Year(), next.Month(), next.Day(), 0, 0, 0, 0, time.UTC)))
	})
}
