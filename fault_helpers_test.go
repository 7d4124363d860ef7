package azdispatch

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
)

// answerTransport lets answer reply to a request in the service's place;
// a nil reply sends the request on.
type answerTransport struct {
	next   policy.Transporter
	answer func(*http.Request) *http.Response
}

func (a *answerTransport) Do(req *http.Request) (*http.Response, error) {
	if r := a.answer(req); r != nil {
		return r, nil
	}
	return a.next.Do(req)
}

// serviceError is the service's answer to a refused request: status, its
// error code in the header and the XML body, and any extra headers.
func serviceError(req *http.Request, status int, code string, extra http.Header) *http.Response {
	body := `<?xml version="1.0" encoding="utf-8"?><Error><Code>` + code + `</Code><Message>injected</Message></Error>`
	h := http.Header{"X-Ms-Error-Code": {code}, "Content-Type": {"application/xml"}}
	for k, v := range extra {
		h[k] = v
	}
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Header: h,
		Body: io.NopCloser(strings.NewReader(body)), Request: req, ContentLength: int64(len(body)),
	}
}

// answeringAccount opens the emulator with answer in front of it and no SDK
// retries, so that each call the listener makes is one HTTP attempt.
func answeringAccount(t testing.TB, answer func(*http.Request) *http.Response) *Account {
	t.Helper()
	return testAccount(t, &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: &answerTransport{next: newHTTPClient(), answer: answer},
		Retry:     policy.RetryOptions{MaxRetries: -1, RetryDelay: time.Millisecond},
	}}})
}

// isReceive reports whether req is a queue receive (GET of messages).
func isReceive(req *http.Request) bool {
	return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/messages")
}
