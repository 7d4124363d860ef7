package dashboard

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"
)

// Sparkline size, in SVG user units (CSS scales it).
const (
	sparkWidth  = 120
	sparkHeight = 24
)

// sparkline draws samples over the window ending at now as an inline SVG:
// a polyline per run of good samples, so that a failed reading is a gap
// and not a drop to zero. The drawing holds numbers only and a label
// escaped here; its colours come from the stylesheet (no inline style,
// which the Content-Security-Policy forbids). label names the series for a
// screen reader, with its range and last value in words.
func sparkline(samples []sample, now time.Time, label string, format func(float64) string) template.HTML {
	from := now.Add(-window)
	lo, hi, good := 0.0, 0.0, 0
	var last *sample
	for i := range samples {
		s := &samples[i]
		if !s.ok {
			continue
		}
		if good == 0 || s.v < lo {
			lo = s.v
		}
		if good == 0 || s.v > hi {
			hi = s.v
		}
		good++
		last = s
	}
	desc := "no reading in the last hour"
	if good > 0 {
		desc = fmt.Sprintf("last hour: %d readings, lowest %s, highest %s, last %s", good, format(lo), format(hi), format(last.v))
	}
	full := label + ", " + desc
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s"><title>%s</title>`,
		sparkWidth, sparkHeight, sparkWidth, sparkHeight, html.EscapeString(full), html.EscapeString(full))
	span := hi - lo
	if span == 0 {
		span = 1
	}
	x := func(t time.Time) float64 {
		f := float64(t.Sub(from)) / float64(window)
		return min(max(f, 0), 1) * sparkWidth
	}
	y := func(v float64) float64 {
		if hi == lo {
			if hi == 0 {
				return sparkHeight - 2
			}
			return sparkHeight / 2
		}
		return 2 + (1-(v-lo)/span)*(sparkHeight-4)
	}
	var run []string
	flush := func() {
		switch len(run) {
		case 0:
		case 1:
			fmt.Fprintf(&b, `<circle class="spark-dot" cx="%s" r="1.5"/>`, strings.Replace(run[0], ",", `" cy="`, 1))
		default:
			fmt.Fprintf(&b, `<polyline class="spark-line" points="%s"/>`, strings.Join(run, " "))
		}
		run = run[:0]
	}
	for _, s := range samples {
		if !s.ok {
			flush()
			continue
		}
		run = append(run, fmt.Sprintf("%.1f,%.1f", x(s.at), y(s.v)))
	}
	flush()
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and an escaped label only
}
