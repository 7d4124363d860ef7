package azdispatch

import "time"

// EventKind says what an Event reports.
type EventKind int

const (
	// ScaleUp: the listener started dequeuers after reading the queue's depth.
	ScaleUp EventKind = iota + 1
	// ScaleDown: an idle dequeuer stopped.
	ScaleDown
	// Idle: a dequeuer found the queue empty and is backing off.
	Idle
	// Woken: Notify (or a WakeSource) woke the listener: a dequeuer was
	// backing off, or none was running. (State.Wakes counts every call.)
	Woken
)

func (k EventKind) String() string {
	switch k {
	case ScaleUp:
		return "scale-up"
	case ScaleDown:
		return "scale-down"
	case Idle:
		return "idle"
	case Woken:
		return "woken"
	}
	return "unknown"
}

// Event is a change in a listener's dequeuers, for logs and metrics. See
// ListenerConfig.OnEvent.
type Event struct {
	Kind      EventKind
	Dequeuers int           // active dequeuers after the change
	Depth     int           // ScaleUp: the depth that was read
	IdleCount int           // Idle: empty receives in a row by this dequeuer
	Delay     time.Duration // Idle: how long it backs off
}
