package otelazdispatch_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/tracing/azotel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/azurite"
	"github.com/azdispatch/azdispatch/otelazdispatch"
)

// With the Azure SDK's own tracing on as well (azotel), this package's
// spans are the same, one per messaging operation. The SDK's HTTP spans
// (one per attempt) would be children of the span in the request's
// context: every queue request made for a receive, a settle or a send
// carries this package's span, which a pipeline policy checks here. (The
// storage modules this one is built on, azqueue v1.0.1 and azblob v1.8.3,
// start no spans of their own: the SDK's HTTP tracing policy only traces
// requests made inside a span of the SDK's, so it makes none today. The
// test counts them, and checks that any that appear nest under ours.)
func TestAzureSDKSpansNestUnderThisPackages(t *testing.T) {
	azurite.SkipIfShort(t)
	emulator := azurite.ForTest(t)
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{Propagate: true})
	seen := &spanRecorder{}
	account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(), &azdispatch.AccountOptions{
		Client: &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
			TracingProvider:  azotel.NewTracingProvider(tel.tp, nil),
			PerRetryPolicies: []policy.Policy{seen},
		}},
	})
	require.NoError(t, err)
	q, err := account.Queue(fmt.Sprintf("nested-%d", time.Now().UnixNano()%1e9))
	require.NoError(t, err)
	require.NoError(t, q.Create(context.Background()))
	tel.spans.Reset()
	seen.reset()

	sendAndHandleOne(t, inst, q)

	ours := map[trace.SpanID]tracetest.SpanStub{}
	var sdk []tracetest.SpanStub
	for _, s := range tel.spans.GetSpans() {
		if s.InstrumentationScope.Name == otelazdispatch.ScopeName {
			ours[s.SpanContext.SpanID()] = s
		} else {
			sdk = append(sdk, s)
		}
	}
	byName := tel.byName()
	assert.Len(t, byName["send "+q.Name()], 1)
	assert.Len(t, byName["process "+q.Name()], 1)
	assert.Len(t, byName["delete "+q.Name()], 1, "one settle span: the delete")
	t.Logf("spans the Azure SDK made: %d", len(sdk))
	all := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range tel.spans.GetSpans() {
		all[s.SpanContext.SpanID()] = s
	}
	under := map[string]int{}
	for _, s := range sdk {
		// Walk up to the first span of this package.
		p := s
		for {
			parent, ok := all[p.Parent.SpanID()]
			if !ok {
				t.Errorf("SDK span %q is not under a span of this package", s.Name)
				break
			}
			if _, mine := ours[parent.SpanContext.SpanID()]; mine {
				under[parent.Name]++
				break
			}
			p = parent
		}
	}
	t.Logf("SDK spans under this package's: %v", under)

	// Every request carried the span of the operation it was made for.
	requests := seen.all()
	require.NotEmpty(t, requests)
	carried := map[string]int{}
	for _, id := range requests {
		if s, ok := ours[id]; ok {
			carried[s.Name]++
		}
	}
	t.Logf("requests by the span their context carried: %v of %d", carried, len(requests))
	assert.Positive(t, carried["send "+q.Name()])
	assert.Positive(t, carried["delete "+q.Name()])
	assert.Positive(t, carried["receive "+q.Name()])
}

// spanRecorder is a pipeline policy that records the span in each
// request's context: the parent an SDK HTTP span would have.
type spanRecorder struct {
	mu  sync.Mutex
	ids []trace.SpanID
}

func (r *spanRecorder) Do(req *policy.Request) (*http.Response, error) {
	r.mu.Lock()
	r.ids = append(r.ids, trace.SpanContextFromContext(req.Raw().Context()).SpanID())
	r.mu.Unlock()
	return req.Next()
}

func (r *spanRecorder) reset() {
	r.mu.Lock()
	r.ids = nil
	r.mu.Unlock()
}

func (r *spanRecorder) all() []trace.SpanID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]trace.SpanID(nil), r.ids...)
}
