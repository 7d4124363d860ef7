package azdispatch

var _ WakeSource = (*ShardedQueue)(nil)

// Subscribe implements WakeSource: wake is called after every send, in this
// process, through one of the set's shards that is itself a WakeSource (a
// *Queue is), whether it went through this ShardedQueue, another view of
// the same shards, or the shard directly. The shard sent to is marked as
// holding messages first, so that the receive the wake-up brings asks it
// even if it was empty a moment ago.
func (s *ShardedQueue) Subscribe(wake func()) (cancel func()) {
	var cancels []func()
	for _, i := range s.members {
		ws, ok := s.set.shards[i].(WakeSource)
		if !ok {
			continue
		}
		cancels = append(cancels, ws.Subscribe(func() {
			s.set.mu.Lock()
			s.set.read[i].empty = false
			s.set.mu.Unlock()
			wake()
		}))
	}
	return func() {
		for _, c := range cancels {
			c()
		}
	}
}
