package azurite

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parsePSTime parses the CPU time ps prints ("time" column): seconds, with
// minutes, hours and days before them as [[dd-]hh:]mm:ss[.ff]. macOS prints
// minutes past 59 as they are ("123:04.56"), which this reads the same way.
func parsePSTime(s string) (time.Duration, error) {
	var days int64
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("ps time %q: %w", s, err)
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 || parts[0] == "" {
		return 0, fmt.Errorf("ps time %q: not [[dd-]hh:]mm:ss", s)
	}
	secs, err := strconv.ParseFloat(parts[len(parts)-1], 64)
	if err != nil {
		return 0, fmt.Errorf("ps time %q: %w", s, err)
	}
	total := time.Duration(secs*float64(time.Second)) + time.Duration(days)*24*time.Hour
	unit := time.Minute
	for i := len(parts) - 2; i >= 0; i-- {
		n, err := strconv.ParseInt(parts[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("ps time %q: %w", s, err)
		}
		total += time.Duration(n) * unit
		unit *= 60
	}
	return total, nil
}
