package syncx

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTokensNeverExceedTheirCount(t *testing.T) {
	t.Parallel()
	tok := NewTokens(3)
	var held, most atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 200 {
				if !tok.Take(nil, nil) {
					t.Error("Take failed with no channel closed")
					return
				}
				n := held.Add(1)
				for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
				}
				held.Add(-1)
				tok.Give()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 3 || m < 1 {
		t.Fatalf("at most %d held at once, want 1..3", m)
	}
	if !tok.TryTake() || !tok.TryTake() || !tok.TryTake() || tok.TryTake() {
		t.Fatal("all three tokens should be free again, and no fourth")
	}
}

func TestTokensTakeEndsWhenAChannelCloses(t *testing.T) {
	t.Parallel()
	tok := NewTokens(1)
	if !tok.TryTake() {
		t.Fatal("the only token should be free")
	}
	stop := make(chan struct{})
	go func() {
		time.Sleep(10 * time.Millisecond)
		close(stop)
	}()
	if tok.Take(nil, stop) {
		t.Fatal("took a token none gave back")
	}
	tok.Give()
	if !tok.Take(nil, stop) {
		t.Fatal("a given token should be taken even after stop closed")
	}
}
