package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
)

// chaosPad makes each chaos message about 250 bytes: the scenario tests
// correctness, and a lighter message leaves the emulator's time to it.
var chaosPad = strings.Repeat("x", 220)

// chaosPublishers send numbered messages at a steady rate through a
// fault-injecting transport, and keep what each send's caller learnt.
//
// Their client makes one attempt per send (Retry.MaxRetries -1). A send is
// not idempotent: were the SDK to retry one whose response was lost, the
// service would hold two copies, both handled, and the check could not
// tell that duplicate from the listener's. With one attempt, a lost
// response is a failed send whose message may or may not be on the queue:
// indeterminate, as Jepsen counts it. (A publisher with the SDK's default
// retries turns every lost send response into a duplicate message.)
type chaosPublishers struct {
	faults *faultTransport
	next   atomic.Int64
	stop   context.CancelFunc
	wg     sync.WaitGroup // the pacer and the senders

	mu     sync.Mutex
	sends  map[int]sendStatus
	counts map[string]int
	events *durableLog
}

// sendNote is where the transport tells a send what it did to it.
type sendNote struct{ refused, lost atomic.Bool }

type sendNoteKey struct{}

// startPublishers sends to queue at rate messages a second from senders
// goroutines until stop is called.
func startPublishers(ctx context.Context, cs, queue string, rate float64, senders int, rates faultRates, rng *lockedRand, events *durableLog) (*chaosPublishers, error) {
	p := &chaosPublishers{sends: map[int]sendStatus{}, counts: map[string]int{}, events: events}
	p.faults = &faultTransport{next: newHTTPClient(), rng: rng, rates: rates, note: p.noteFault}
	acct, err := azdispatch.NewAccountFromConnectionString(cs, &azdispatch.AccountOptions{
		Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
			Transport: p.faults,
			Retry:     policy.RetryOptions{MaxRetries: -1, TryTimeout: 5 * time.Second},
		}},
	})
	if err != nil {
		return nil, err
	}
	q, err := acct.Queue(queue)
	if err != nil {
		return nil, err
	}
	pub, err := azdispatch.NewPublisher[payload](q, nil)
	if err != nil {
		return nil, err
	}
	tokens := make(chan struct{}, senders)
	paceCtx, stop := context.WithCancel(ctx)
	p.stop = stop
	p.wg.Go(func() {
		defer close(tokens)
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for {
			select {
			case <-paceCtx.Done():
				return
			case <-t.C:
				select {
				case tokens <- struct{}{}:
				default: // every sender is busy (an emulator stall): skip, do not burst later
				}
			}
		}
	})
	for range senders {
		// A send under way when the pacing stops finishes, on ctx: cutting
		// it short would only make it indeterminate.
		p.wg.Go(func() {
			for range tokens {
				p.sendOne(ctx, pub)
			}
		})
	}
	return p, nil
}

// halt stops sending and waits for the sends under way.
func (p *chaosPublishers) halt() {
	p.stop()
	p.wg.Wait()
}

func (p *chaosPublishers) sendOne(ctx context.Context, pub *azdispatch.Publisher[payload]) {
	seq := int(p.next.Add(1))
	note := &sendNote{}
	_, err := pub.Send(context.WithValue(ctx, sendNoteKey{}, note), payload{Seq: seq, Pad: chaosPad})
	st := sendOK
	switch {
	case err == nil:
	case note.refused.Load() && !note.lost.Load():
		st = sendRefused // the transport answered for the service: nothing was sent
	default:
		st = sendIndeterminate
	}
	if st != sendOK {
		_ = p.events.line("send", seq, "failed:", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	p.mu.Lock()
	p.sends[seq] = st
	p.mu.Unlock()
}

// noteFault counts a fault injected into a send, and tells the send.
func (p *chaosPublishers) noteFault(req *http.Request, kind string, _ requestOp, _ string) {
	if n, ok := req.Context().Value(sendNoteKey{}).(*sendNote); ok {
		switch kind {
		case fault503, fault500:
			n.refused.Store(true)
		case faultLostSend:
			n.lost.Store(true)
		}
	}
	_ = p.events.line(recFault, kind, "publisher")
	p.mu.Lock()
	p.counts[kind]++
	p.mu.Unlock()
}

// results returns the sends by sequence number and the faults injected.
func (p *chaosPublishers) results() (map[int]sendStatus, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sends := make(map[int]sendStatus, len(p.sends))
	for k, v := range p.sends {
		sends[k] = v
	}
	counts := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		counts[k] = v
	}
	return sends, counts
}

// sentSoFar counts the acknowledged and the indeterminate sends.
func (p *chaosPublishers) sentSoFar() (ok, indeterminate int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.sends {
		switch st {
		case sendOK:
			ok++
		case sendIndeterminate:
			indeterminate++
		}
	}
	return ok, indeterminate
}
