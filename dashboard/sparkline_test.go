package dashboard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSparklineDrawsGapsForFailedReadingsAndEscapesItsLabel(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(min int) time.Time { return now.Add(time.Duration(min-60) * time.Minute) }
	samples := []sample{
		{at: at(0), v: 1, ok: true}, {at: at(30), v: 5, ok: true},
		{at: at(31), ok: false}, // a failed reading: a gap, not a zero
		{at: at(45), v: 3, ok: true}, {at: at(60), v: 2, ok: true},
	}
	str := func(v float64) string { return fmt.Sprint(v) }
	svg := string(sparkline(samples, now, `depth of <"q">`, str))
	assert.Equal(t, 2, strings.Count(svg, "<polyline"), "two runs around the gap")
	assert.Contains(t, svg, `points="0.0,22.0 60.0,2.0"`, "x by time in the hour, y from the lowest (bottom) to the highest (top)")
	assert.Contains(t, svg, `aria-label="depth of &lt;&#34;q&#34;&gt;, last hour: 4 readings, lowest 1, highest 5, last 2"`)
	assert.NotContains(t, svg, `<"q">`)
	assert.NotContains(t, svg, "style")

	one := string(sparkline(samples[:1], now, "x", str))
	assert.Contains(t, one, "<circle", "a single reading is a dot")
	none := string(sparkline(nil, now, "x", str))
	assert.Contains(t, none, "no reading in the last hour")
	assert.NotContains(t, none, "<polyline")
}

func TestHistoryKeepsTheLastHour(t *testing.T) {
	t.Parallel()
	h := newHistory(10 * time.Minute) // 7 slots
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		h.add("k", sample{at: start.Add(time.Duration(i) * 10 * time.Minute), v: float64(i), ok: true})
	}
	got := h.since("k", start.Add(90*time.Minute-window))
	assert.Len(t, got, 6)
	assert.Equal(t, 4.0, got[0].v)
	assert.Equal(t, 9.0, got[5].v)
	assert.Empty(t, h.since("other", start))
}
