// Package cron reads five-field cron expressions (minute, hour, day of
// month, month, day of week) and finds their next occurrence in a
// *time.Location.
//
// Fields take "*", numbers, ranges "a-b", lists "a,b", and steps "*/n" or
// "a-b/n"; months and weekdays take their English three-letter names too
// (JAN, SUN), and Sunday is 0 or 7. The nicknames @yearly (@annually),
// @monthly, @weekly, @daily (@midnight) and @hourly stand for "0 0 1 1 *",
// "0 0 1 * *", "0 0 * * 0", "0 0 * * *" and "0 * * * *".
//
// As in Vixie cron, when both the day of month and the day of week are
// restricted, a day matches either; a field that starts with "*" (a step
// over the whole range such as "*/2" included) is unrestricted, so
// "0 0 */2 * MON" runs on Mondays that fall on odd days of the month, not
// on odd days or Mondays.
//
// Occurrences are wall-clock times in the location. At a daylight-saving
// change: a wall time that does not exist that day (the hour skipped in
// spring) has no occurrence; a wall time that occurs twice (the hour
// repeated in autumn) has one, at the first of the two instants. So a
// daily "30 2 * * *" in Europe/Berlin does not run on the spring day, and
// runs once on the autumn day; "0 * * * *" runs 23 times and 24 times on
// those days.
package cron

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// ErrSyntax is matched by the error of an expression that does not parse.
var ErrSyntax = errors.New("cron: bad expression")

// maxExpression bounds the text Parse reads.
const maxExpression = 256

// Schedule is a parsed expression: for each field, the set of values it
// matches, as bits.
type Schedule struct {
	minute, hour, dom, month, dow uint64
	domAny, dowAny                bool // the field was "*": see matchDay
	text                          string
}

// field is the range and names of one of the five fields.
type field struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i
}

var fields = [5]field{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
	{name: "day of week", min: 0, max: 7, names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}},
}

// Parse reads a five-field expression. Errors match ErrSyntax and name the
// field at fault.
func Parse(expr string) (*Schedule, error) {
	if len(expr) > maxExpression {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrSyntax, maxExpression)
	}
	text := strings.TrimSpace(expr)
	if strings.HasPrefix(text, "@") {
		full, ok := nicknames[strings.ToLower(text)]
		if !ok {
			return nil, fmt.Errorf("%w: %q is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly", ErrSyntax, text)
		}
		s, err := Parse(full)
		if err == nil {
			s.text = strings.ToLower(text)
		}
		return s, err
	}
	parts := strings.Fields(expr)
	if len(parts) != len(fields) {
		return nil, fmt.Errorf("%w: %q has %d fields, not 5 (minute hour day-of-month month day-of-week)", ErrSyntax, expr, len(parts))
	}
	s := &Schedule{text: strings.Join(parts, " ")}
	sets := [5]*uint64{&s.minute, &s.hour, &s.dom, &s.month, &s.dow}
	for i, p := range parts {
		set, err := fields[i].parse(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s field %q: %v", ErrSyntax, fields[i].name, p, err)
		}
		*sets[i] = set
	}
	if s.dow&(1<<7) != 0 {
		s.dow |= 1 // 7 is Sunday too
	}
	// Vixie cron takes a field that starts with "*" for unrestricted,
	// "*/2" too, when it decides whether the two day fields combine.
	s.domAny, s.dowAny = strings.HasPrefix(parts[2], "*"), strings.HasPrefix(parts[4], "*")
	return s, nil
}

// nicknames are the expressions the @ forms stand for, as Vixie cron reads
// them.
var nicknames = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

// String is the expression, its fields separated by single spaces.
func (s *Schedule) String() string { return s.text }

// parse reads one field into a set of bits.
func (f field) parse(text string) (uint64, error) {
	var set uint64
	for item := range strings.SplitSeq(text, ",") {
		span, stepText, stepped := strings.Cut(item, "/")
		step := 1
		if stepped {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 || n > f.max {
				return 0, fmt.Errorf("step %q is not 1 to %d", stepText, f.max)
			}
			step = n
		}
		lo, hi := f.min, f.max
		switch {
		case span == "*":
		case strings.Contains(span, "-"):
			a, b, _ := strings.Cut(span, "-")
			var err error
			if lo, err = f.value(a); err != nil {
				return 0, err
			}
			if hi, err = f.value(b); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %q runs backwards", span)
			}
		default:
			v, err := f.value(span)
			if err != nil {
				return 0, err
			}
			lo, hi = v, v
			if stepped {
				hi = f.max // "a/n" is "a-max/n", as in Vixie cron
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

// value reads one number or name of the field.
func (f field) value(text string) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(text, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(text)
	if err != nil || v < f.min || v > f.max {
		return 0, fmt.Errorf("%q is not %d to %d", text, f.min, f.max)
	}
	return v, nil
}

// searchYears bounds how far Next looks: an expression such as "0 0 30 2 *"
// (30 February) never occurs.
const searchYears = 5

// Next returns the first occurrence strictly after after, in loc (UTC if
// nil), to the minute; the zero time if there is none within five years.
func (s *Schedule) Next(after time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	local := after.In(loc)
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	end := day.AddDate(searchYears, 0, 0)
	for ; day.Before(end); day = day.AddDate(0, 0, 1) {
		if !s.matchDay(day) {
			continue
		}
		for h := range bitsOf(s.hour) {
			for m := range bitsOf(s.minute) {
				t := time.Date(day.Year(), day.Month(), day.Day(), h, m, 0, 0, loc)
				if t.Hour() != h || t.Minute() != m || t.Day() != day.Day() {
					continue // a wall time a daylight-saving change skips
				}
				t = firstInstant(t)
				if t.After(after) {
					return t
				}
			}
		}
	}
	return time.Time{}
}

// firstInstant is the first instant whose wall clock reads as t's does:
// t itself, or, in the hour an autumn change repeats, the instant an hour
// (or half an hour, where the change is that long) before it. time.Date
// does not say which of the two it returns.
func firstInstant(t time.Time) time.Time {
	first := t
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if e := t.Add(-back); sameWall(e, t) {
			first = e
		}
	}
	return first
}

// sameWall reports whether a and b read the same on a wall clock, to the
// minute.
func sameWall(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}

// matchDay reports whether day (midnight in its location) matches the
// month, day-of-month and day-of-week fields.
func (s *Schedule) matchDay(day time.Time) bool {
	if s.month&(1<<int(day.Month())) == 0 {
		return false
	}
	dom := s.dom&(1<<day.Day()) != 0
	dow := s.dow&(1<<int(day.Weekday())) != 0
	if s.domAny || s.dowAny {
		return dom && dow
	}
	return dom || dow
}

// bitsOf yields the values set in b, lowest first.
func bitsOf(b uint64) func(func(int) bool) {
	return func(yield func(int) bool) {
		for b != 0 {
			v := bits.TrailingZeros64(b)
			if !yield(v) {
				return
			}
			b &^= 1 << v
		}
	}
}
