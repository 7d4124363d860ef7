package dashboard

import (
	"fmt"
	"strconv"
	"time"

	"github.com/azdispatch/azdispatch"
)

// rateWindow is the span a listener's throughput is measured over: long
// enough to smooth a burst, short enough to show a change within minutes.
const rateWindow = 5 * time.Minute

// rateEvery spaces the samples kept: pages viewed more often add none.
const rateEvery = time.Second

// rateSample is a listener's settled count at a time.
type rateSample struct {
	at   time.Time
	done int64
}

// rateSamples are the samples of one listener's settled count, taken when
// it is registered and when a page shows it: the dashboard runs no timer
// of its own, so the first view after a long quiet spell measures since
// the last one, and says over how long.
type rateSamples struct {
	s []rateSample
}

// settled is what throughput counts: messages handled to an end, deleted
// or poisoned. Retries are not an end: the message comes back.
func settled(s azdispatch.State) int64 { return s.Succeeded + s.Poisoned }

// add records done at now and returns the rate over the span from the
// oldest sample kept (the newest one at least rateWindow old, or the
// first) to now, as "2.5 /s over 5 min 0 s"; "—" before a second has
// passed, or if the count went down (a listener replaced behind the
// dashboard's back).
func (r *rateSamples) add(now time.Time, done int64) string {
	if n := len(r.s); n == 0 || now.Sub(r.s[n-1].at) >= rateEvery {
		r.s = append(r.s, rateSample{at: now, done: done})
	}
	// Keep one sample older than the window, as its base.
	for len(r.s) > 2 && now.Sub(r.s[1].at) >= rateWindow {
		r.s = r.s[1:]
	}
	base := r.s[0]
	span := now.Sub(base.at)
	if span < rateEvery || done < base.done {
		return "—"
	}
	return fmtRate(float64(done-base.done)/span.Seconds()) + " over " + fmtDuration(span.Truncate(time.Second))
}

// fmtRate is a rate per second with the precision a person reads.
func fmtRate(perSec float64) string {
	switch {
	case perSec == 0:
		return "0 /s"
	case perSec < 10:
		return fmt.Sprintf("%.2f /s", perSec)
	case perSec < 100:
		return fmt.Sprintf("%.1f /s", perSec)
	}
	return fmt.Sprintf("%.0f /s", perSec)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
