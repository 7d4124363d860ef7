// Package syncx holds the small synchronization pieces of a listener: the
// slots that bound the messages a dequeuer holds, the release times that
// shorten an idle wait, the wake-up callbacks and broadcast, and a sleep
// that a wake-up or a context ends early.
package syncx
