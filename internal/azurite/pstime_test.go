package azurite

import (
	"testing"
	"time"
)

func TestParsePSTime(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"0:00.04":     40 * time.Millisecond,
		"1:02.50":     62500 * time.Millisecond,
		"123:04.00":   123*time.Minute + 4*time.Second, // macOS: minutes past 59
		"01:02:03":    time.Hour + 2*time.Minute + 3*time.Second,
		"2-01:00:00":  49 * time.Hour,
		"00:00:07.25": 7250 * time.Millisecond,
	} {
		got, err := parsePSTime(in)
		if err != nil || got != want {
			t.Errorf("parsePSTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "1:2:3:4", "a:00"} {
		if _, err := parsePSTime(in); err == nil {
			t.Errorf("parsePSTime(%q): no error", in)
		}
	}
}
