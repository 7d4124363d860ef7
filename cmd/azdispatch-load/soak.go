package main

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"time"
)

// soakDuration is how long a soak injects faults: -duration, or 3 minutes,
// long enough for every kind of fault to fall more than once.
func soakDuration(o options) time.Duration {
	if o.duration > 0 {
		return o.duration
	}
	return 3 * time.Minute
}

// soakSeed is the seed of a soak's random draws: -seed, to replay a run,
// or a random one, which the scenario prints so that this run can be
// replayed too.
func soakSeed(o options) int64 {
	if o.seed != 0 {
		return o.seed
	}
	var b [8]byte
	_, _ = crand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1) // not negative, so it reads as a -seed value
}

// soakFailed adds to the error of a soak that could not finish what it
// takes to look into it: the seed that replays it, and where the run's
// records are (dir is empty before they were made).
func soakFailed(err error, seed int64, dir string) error {
	if dir == "" {
		return err
	}
	return fmt.Errorf("%w (seed %d; the run's records are kept in %s)", err, seed, dir)
}
