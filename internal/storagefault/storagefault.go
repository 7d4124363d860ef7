// Package storagefault answers storage requests in the service's place, for
// tests: an HTTP transport for the Azure SDK that lets a test refuse chosen
// requests (403, 503 ServerBusy, 500 OperationTimedOut…) as the service
// would, and passes the rest on to the emulator.
package storagefault

import (
	"io"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Transport lets Answer reply to a request in the service's place; a nil
// reply sends the request on to Next (http.DefaultTransport if nil).
type Transport struct {
	Next   policy.Transporter
	Answer func(*http.Request) *http.Response
}

// Do implements policy.Transporter.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	if r := t.Answer(req); r != nil {
		return r, nil
	}
	if t.Next == nil {
		return http.DefaultTransport.RoundTrip(req)
	}
	return t.Next.Do(req)
}

// ServiceError is the service's answer to a refused request: status, its
// error code in the header and the XML body, and any extra headers.
func ServiceError(req *http.Request, status int, code string, extra http.Header) *http.Response {
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

// IsReceive reports whether req is a queue receive (a GET of messages).
func IsReceive(req *http.Request) bool {
	return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/messages")
}
