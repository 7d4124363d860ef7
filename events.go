package azdispatch

import "time"

// EventKind says what an Event reports.
type EventKind int

const (
	// EventScaleUp: the listener started dequeuers after reading the queue's depth.
	EventScaleUp EventKind = iota + 1
	// EventScaleDown: an idle dequeuer stopped.
	EventScaleDown
	// EventIdle: a dequeuer found the queue empty and is backing off.
	EventIdle
	// EventWoken: Notify (or a WakeSource) woke the listener: a dequeuer was
	// backing off, or none was running. (State.Wakes counts every call.)
	EventWoken
	// EventFatal: storage refused a request in a way retrying will not fix
	// (see ErrFatal): Err says how. The listener keeps trying; State.Fatal
	// and Ready show it until a request of the same kind succeeds.
	EventFatal
	// EventRecovered: a request of a kind that had failed fatally succeeded;
	// Err is the error that stood until then.
	EventRecovered
)

func (k EventKind) String() string {
	switch k {
	case EventScaleUp:
		return "scale-up"
	case EventScaleDown:
		return "scale-down"
	case EventIdle:
		return "idle"
	case EventWoken:
		return "woken"
	case EventFatal:
		return "fatal"
	case EventRecovered:
		return "recovered"
	}
	return "unknown"
}

// Event is a change in a listener's dequeuers or in its standing with
// storage, for logs and metrics. See
// ListenerOptions.OnEvent.
type Event struct {
	Kind      EventKind
	Dequeuers int           // active dequeuers after the change
	Depth     int           // EventScaleUp: the depth that was read
	IdleCount int           // EventIdle: empty receives in a row by this dequeuer
	Delay     time.Duration // EventIdle: how long it backs off
	Err       error         // EventFatal, EventRecovered: the fatal storage error
}
