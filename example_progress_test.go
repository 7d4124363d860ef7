package azdispatch_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// Three thumbnails as a group, and the index built once all three are
// done: the listener of the thumbnails sends the continuation when the
// last one finishes.
func ExamplePayloadStore_StartGroup() {
	ctx := context.Background()
	thumbs, index := memqueue.New("thumbnails", nil), memqueue.New("index", nil)
	thumbPub, _ := azdispatch.NewPublisher[string](thumbs, nil)
	indexPub, _ := azdispatch.NewPublisher[string](index, nil)

	then, _ := azdispatch.ContinueWith(indexPub, "build the index of album 7")
	g, err := thumbs.PayloadStore().StartGroup(ctx, 3, then, &azdispatch.GroupOptions{ID: "album-7"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, img := range []string{"a.jpg", "b.jpg", "c.jpg"} {
		_, _ = thumbPub.SendWith(ctx, img, &azdispatch.SendOptions{Group: g.Child(i)})
	}

	l, _ := azdispatch.NewListener(thumbs, func(ctx context.Context, m *azdispatch.Message[string]) error {
		// The thumbnail is made: leave where it is for the continuation.
		return azdispatch.SetGroupResult(ctx, []byte("thumbs/"+m.Body))
	}, &azdispatch.ListenerOptions{Payloads: azdispatch.PayloadOptions{
		// A *Queue sends it to its account's queue of that name.
		Continue: func(string) (azdispatch.Target, error) { return index, nil },
	}})
	runCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	var running sync.WaitGroup
	defer running.Wait() // after stop: each Run returns
	running.Go(func() { _ = l.Run(runCtx) })

	done := make(chan struct{})
	next, _ := azdispatch.NewListener(index, func(ctx context.Context, m *azdispatch.Message[string]) error {
		o, _ := azdispatch.GroupOutcomeOf(m.MessageInfo)
		fmt.Printf("%s: group %s %s, %d of %d\n", m.Body, o.ID, o.Outcome, o.Succeeded, o.Size)
		results, err := thumbs.PayloadStore().GroupResults(ctx, o.ID)
		if err != nil {
			return err
		}
		fmt.Printf("child 1 left %s\n", results[1])
		close(done)
		return nil
	}, nil)
	running.Go(func() { _ = next.Run(runCtx) })
	<-done
	stop()
	// Output:
	// build the index of album 7: group album-7 succeeded, 3 of 3
	// child 1 left thumbs/b.jpg
}

// A tracked message's status, by the token its send returned: pending,
// then, once a listener has handled it, succeeded.
func ExamplePayloadStore_MessageStatus() {
	ctx := context.Background()
	orders := memqueue.New("orders", nil)
	pub, _ := azdispatch.NewPublisher[string](orders, nil)
	sent, err := pub.SendWith(ctx, "order 42", &azdispatch.SendOptions{Track: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	store := orders.PayloadStore()
	st, _ := store.MessageStatus(ctx, sent.StatusToken)
	fmt.Println(st.State)

	l, _ := azdispatch.NewListener(orders, func(context.Context, *azdispatch.Message[string]) error { return nil }, nil)
	runCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	var running sync.WaitGroup
	defer running.Wait()
	running.Go(func() { _ = l.Run(runCtx) })
	for l.State().Succeeded == 0 && runCtx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	st, _ = store.MessageStatus(ctx, sent.StatusToken)
	fmt.Println(st.State, st.Final, st.Tries)
	// Output:
	// pending
	// succeeded true 1
}
