package svcclock

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Policy sits in the SDK pipeline's per-retry slot, so that every answer,
// whatever its status, sets the clock of the account it came from, and
// tells a request that asked (see WithTries) that an answer came.
type Policy struct{ Clock *Clock }

// Do implements policy.Policy.
func (p Policy) Do(req *policy.Request) (*http.Response, error) {
	a, _ := req.Raw().Context().Value(triesKey{}).(*Tries)
	if a != nil {
		a.tried.Add(1)
	}
	resp, err := req.Next()
	if resp != nil {
		p.Clock.SawHeader(resp.Header)
		if a != nil {
			a.answered.Add(1)
		}
	}
	return resp, err
}

// Tries counts the HTTP attempts of the requests made with a context (see
// WithTries), and those that got an answer.
type Tries struct{ tried, answered atomic.Int32 }

type triesKey struct{}

// WithTries returns a copy of ctx whose requests count their attempts, and
// the answers they got: a request cut off by its deadline after the service
// answered (the SDK retrying a 503) is not one that got no answer at all,
// and one whose first attempt got none, retried, may have acted before its
// retry was answered.
func WithTries(ctx context.Context) (context.Context, *Tries) {
	a := new(Tries)
	return context.WithValue(ctx, triesKey{}, a), a
}

// LostAnswer reports whether an attempt went unanswered: it may have
// acted.
func (a *Tries) LostAnswer() bool { return a.tried.Load() > a.answered.Load() }

// Answered reports whether any attempt got an answer.
func (a *Tries) Answered() bool { return a.answered.Load() > 0 }
