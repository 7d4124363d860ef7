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
	}
	return "unknown"
}

// Event is a change in a listener's dequeuers, for logs and metrics. See
// ListenerOptions.OnEvent.
type Event struct {
	Kind      EventKind
	Dequeuers int           // active dequeuers after the change
	Depth     int           // EventScaleUp: the depth that was read
	IdleCount int           // EventIdle: empty receives in a row by this dequeuer
	Delay     time.Duration // EventIdle: how long it backs off
}
