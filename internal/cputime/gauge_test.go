package cputime

import (
	"errors"
	"testing"
	"time"
)

// fakeProcess is a process whose CPU time and clock a test sets.
type fakeProcess struct {
	cpu time.Duration
	err error
	now time.Time
}

func (p *fakeProcess) read() (time.Duration, error) { return p.cpu, p.err }
func (p *fakeProcess) clock() time.Time             { return p.now }

func TestGaugeTellsAFullProcessFromOneThatWaits(t *testing.T) {
	p := &fakeProcess{cpu: time.Minute, now: time.Unix(1000, 0)}
	procs := 2
	g := NewGaugeWith(p.read, func() int { return procs }, p.clock, 100*time.Millisecond)

	p.now = p.now.Add(99 * time.Millisecond)
	if _, known := g.Full(); known {
		t.Fatal("known before the first span ended")
	}
	p.now = p.now.Add(-99 * time.Millisecond)
	steps := []struct {
		name   string
		after  time.Duration // since the last step
		burned time.Duration // CPU time used meanwhile
		procs  int
		full   bool
	}{
		{"both cores all the time", 100 * time.Millisecond, 200 * time.Millisecond, 2, true},
		{"exactly at the threshold", 200 * time.Millisecond, 360 * time.Millisecond, 2, true},
		{"just under it", 100 * time.Millisecond, 179 * time.Millisecond, 2, false},
		{"one core of two", time.Second, time.Second, 2, false},
		{"one core of one", time.Second, time.Second, 1, true},
		{"a long wait", time.Hour, time.Second, 1, false},
	}
	for _, s := range steps {
		procs = s.procs
		p.cpu += s.burned
		p.now = p.now.Add(s.after)
		full, known := g.Full()
		if !known || full != s.full {
			t.Fatalf("%s: Full = %v, %v; want %v, true", s.name, full, known, s.full)
		}
		// A look within the next span keeps this verdict, whatever the
		// process burns meanwhile.
		p.cpu += 10 * time.Second
		p.now = p.now.Add(50 * time.Millisecond)
		if again, _ := g.Full(); again != full {
			t.Fatalf("%s: the verdict changed within a span", s.name)
		}
		p.cpu -= 10 * time.Second
		p.now = p.now.Add(-50 * time.Millisecond)
	}
}

func TestGaugeRestartedMeasuresAfreshBeforeItSays(t *testing.T) {
	p := &fakeProcess{now: time.Unix(1000, 0)}
	g := NewGaugeWith(p.read, func() int { return 1 }, p.clock, 100*time.Millisecond)
	p.cpu += 100 * time.Millisecond
	p.now = p.now.Add(100 * time.Millisecond)
	if full, known := g.Full(); !full || !known {
		t.Fatalf("Full = %v, %v; want true, true", full, known)
	}
	// Restarted, with a busy span behind it: unknown until a span has
	// passed, then measured from the restart only.
	p.cpu += time.Second
	g.Restart()
	p.now = p.now.Add(99 * time.Millisecond)
	if _, known := g.Full(); known {
		t.Fatal("known within the span after a restart")
	}
	p.cpu += 10 * time.Millisecond
	p.now = p.now.Add(time.Millisecond)
	if full, known := g.Full(); full || !known {
		t.Fatalf("after the restart's span: Full = %v, %v; want false, true", full, known)
	}
}

func TestGaugeThatCannotReadIsNeverFull(t *testing.T) {
	p := &fakeProcess{err: errors.New("unsupported"), now: time.Unix(1000, 0)}
	g := NewGaugeWith(p.read, func() int { return 1 }, p.clock, time.Millisecond)
	if full, known := g.Full(); full || !known {
		t.Fatalf("unreadable from the start: Full = %v, %v; want false, true", full, known)
	}

	p = &fakeProcess{now: time.Unix(1000, 0)}
	g = NewGaugeWith(p.read, func() int { return 1 }, p.clock, time.Millisecond)
	p.err = errors.New("gone")
	p.cpu = time.Hour
	p.now = p.now.Add(time.Second)
	if full, known := g.Full(); full || !known {
		t.Fatalf("unreadable later: Full = %v, %v; want false, true", full, known)
	}
	g.Restart()
	if full, known := g.Full(); full || !known {
		t.Fatalf("unreadable, restarted: Full = %v, %v; want false, true", full, known)
	}
}

func TestGaugeMeasuresThisProcess(t *testing.T) {
	g := NewGauge()
	// Burn CPU on this goroutine for longer than a span: with one core or
	// more, the gauge may or may not call that full, but it must know.
	deadline := time.Now().Add(2 * Span)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	if _, known := g.Full(); !known {
		t.Fatal("not known after two spans")
	}
}
