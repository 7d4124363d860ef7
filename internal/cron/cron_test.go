package cron

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones the tests name, on any machine

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNextOfCommonExpressions(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 25, 10, 17, 30, 0, time.UTC) // a Wednesday
	for _, c := range []struct{ expr, want string }{
		{"* * * * *", "2026-11-25T10:18:00Z"},
		{"*/15 * * * *", "2026-11-25T10:30:00Z"},
		{"0 * * * *", "2026-11-25T11:00:00Z"},
		{"0 9 * * *", "2026-11-26T09:00:00Z"},
		{"0 9 * * MON-FRI", "2026-11-26T09:00:00Z"},
		{"0 9 * * sat,sun", "2026-11-28T09:00:00Z"},
		{"0 0 1 * *", "2026-12-01T00:00:00Z"},
		{"0 0 1 JAN *", "2027-01-01T00:00:00Z"},
		{"30 4 1,15 * 5", "2026-11-27T04:30:00Z"}, // day 1 or 15, or a Friday
		{"0 0 29 2 *", "2028-02-29T00:00:00Z"},
		{"5/20 * * * *", "2026-11-25T10:25:00Z"},
		{"0 12 * * 7", "2026-11-29T12:00:00Z"}, // 7 is Sunday
		// A field that starts with "*" is unrestricted, as in Vixie cron:
		// Mondays that fall on odd days, not odd days or Mondays (the
		// 27th, an odd Friday, and the 30th, an even Monday, are not).
		{"0 0 */2 * MON", "2026-12-07T00:00:00Z"},
		{"0 0 * * */2", "2026-11-26T00:00:00Z"}, // every other weekday from Sunday: Thursday
		{"@hourly", "2026-11-25T11:00:00Z"},
		{"@daily", "2026-11-26T00:00:00Z"},
		{"@midnight", "2026-11-26T00:00:00Z"},
		{"@weekly", "2026-11-29T00:00:00Z"},
		{"@monthly", "2026-12-01T00:00:00Z"},
		{"@YEARLY", "2027-01-01T00:00:00Z"},
		{"@annually", "2027-01-01T00:00:00Z"},
	} {
		s, err := Parse(c.expr)
		require.NoError(t, err, c.expr)
		assert.Equal(t, c.want, s.Next(from, nil).Format(time.RFC3339), c.expr)
	}
}

func TestAnExpressionThatNeverOccursHasNoNext(t *testing.T) {
	t.Parallel()
	s, err := Parse("0 0 30 2 *")
	require.NoError(t, err)
	assert.True(t, s.Next(time.Now(), nil).IsZero())
}

// At a daylight-saving change, occurrences are wall-clock times: a time
// the spring change skips has none, a time the autumn change repeats has
// one, at the first of its two instants.
func TestDaylightSavingChanges(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	daily, err := Parse("30 2 * * *")
	require.NoError(t, err)
	// 2026-03-29: 02:00 becomes 03:00. No 02:30 that day.
	next := daily.Next(time.Date(2026, 3, 28, 12, 0, 0, 0, berlin), berlin)
	assert.Equal(t, "2026-03-30T02:30:00+02:00", next.Format(time.RFC3339), "skipped on the spring day")
	// 2026-10-25: 03:00 becomes 02:00. 02:30 happens twice: once.
	first := daily.Next(time.Date(2026, 10, 24, 12, 0, 0, 0, berlin), berlin)
	assert.Equal(t, "2026-10-25T02:30:00+02:00", first.Format(time.RFC3339), "the first of the two")
	again := daily.Next(first, berlin)
	assert.Equal(t, "2026-10-26T02:30:00+01:00", again.Format(time.RFC3339), "not the second")

	hourly, err := Parse("0 * * * *")
	require.NoError(t, err)
	count := func(day time.Time) int {
		n := 0
		for t := hourly.Next(day.Add(-time.Second), berlin); t.Before(day.AddDate(0, 0, 1)); t = hourly.Next(t, berlin) {
			n++
		}
		return n
	}
	assert.Equal(t, 23, count(time.Date(2026, 3, 29, 0, 0, 0, 0, berlin)))
	assert.Equal(t, 24, count(time.Date(2026, 10, 25, 0, 0, 0, 0, berlin)), "the repeated hour once")
}

func TestBadExpressionsAreRefused(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
		"* * * 13 *", "* * * * 8", "5-1 * * * *", "*/0 * * * *", "*/61 * * * *", "a * * * *",
		"* * * FOO *", "1,,2 * * * *", "-1 * * * *", string(make([]byte, 300)), "@reboot", "@every 5m", "@",
	} {
		_, err := Parse(expr)
		assert.ErrorIs(t, err, ErrSyntax, "%q", expr)
	}
}

func TestStringIsTheExpression(t *testing.T) {
	t.Parallel()
	s, err := Parse("  0   9 * *  MON-FRI ")
	require.NoError(t, err)
	assert.Equal(t, "0 9 * * MON-FRI", s.String())
}
