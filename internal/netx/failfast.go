package netx

import (
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// FailFast is an Azure SDK transport that fails a request whose connection
// is refused at once, instead of after the SDK's retries (about 10 s):
// nothing listens at the endpoint, and a retry 0.8 s later finds the same.
// When says which requests it applies to; nil means every one. Throttling,
// timeouts and other transport failures are retried as before.
type FailFast struct {
	Next policy.Transporter
	When func(*http.Request) bool
}

// Do sends req through Next.
func (t FailFast) Do(req *http.Request) (*http.Response, error) {
	resp, err := t.Next.Do(req)
	if err != nil && (t.When == nil || t.When(req)) && Refused(err) {
		return nil, refusedError{err}
	}
	return resp, err
}

// refusedError is a refused connection, which the SDK's retry policy does
// not retry: it is errorinfo.NonRetriable.
type refusedError struct{ err error }

func (e refusedError) Error() string { return e.err.Error() }
func (e refusedError) Unwrap() error { return e.err }
func (refusedError) NonRetriable()   {}
