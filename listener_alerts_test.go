package azdispatch_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A listener at default options, started before its queue exists, says so
// once through slog.Default, though it logs nothing else: a person must
// create the queue. (Not parallel: it sets the process's default logger.)
func TestAListenerWithoutALoggerSaysItsQueueIsMissing(t *testing.T) {
	var out azdispatch.SyncBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&out, nil)))

	q := memqueue.New("not-created", nil)
	missing := &azdispatch.StorageError{Op: azdispatch.OpReceive, Queue: "not-created", StatusCode: http.StatusNotFound, Code: "QueueNotFound"}
	q.FailNext(azdispatch.OpReceive, 3, missing)
	fatal := make(chan struct{}, 3)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[int]) error { return nil },
		&azdispatch.ListenerOptions{OnEvent: func(e azdispatch.Event) {
			if e.Kind == azdispatch.EventFatal {
				fatal <- struct{}{}
			}
		}})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Go(func() { _ = l.Run(ctx) })
	select {
	case <-fatal:
	case <-time.After(time.Minute):
		t.Fatal("no EventFatal")
	}
	stop()
	run.Wait()
	logged := out.String()
	assert.Contains(t, logged, "QueueNotFound")
	assert.Contains(t, logged, "source=not-created")
	assert.Equal(t, 1, bytes.Count([]byte(logged), []byte("\n")), "one line: %s", logged)
}
