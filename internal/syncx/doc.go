// Package syncx holds the small synchronization pieces of a listener: the
// slots that bound the messages a dequeuer holds, the times at which
// messages the listener let go of are due again, the wake-up callbacks and
// broadcast, and a sleep that a wake-up or a context ends early. Every wait
// here blocks on a channel; none polls.
package syncx
