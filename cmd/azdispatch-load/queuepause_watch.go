package main

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// requestWatch passes every request on to next, and tells saw of the two
// kinds the pause scenario judges: a receive (Get Messages), with the
// messages its answer brought, and a read of the queue's properties (Get
// Queue Properties: how a listener reads its pause, and its depth). It
// sits where the SDK's transport does, below its retries, so that every
// attempt is seen, as the service would see and bill it; start is when the
// attempt left, by the local clock.
type requestWatch struct {
	next policy.Transporter
	saw  func(kind string, start time.Time, messages int, failed bool)
}

func (w requestWatch) Do(req *http.Request) (*http.Response, error) {
	kind := watchedKind(req)
	if kind == "" {
		return w.next.Do(req)
	}
	start := time.Now()
	resp, err := w.next.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		w.saw(kind, start, 0, true)
		return resp, err
	}
	messages := 0
	if kind == pauseWorkerReceive {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			w.saw(kind, start, 0, true)
			return nil, rerr
		}
		messages = bytes.Count(body, []byte("<QueueMessage>"))
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	w.saw(kind, start, messages, false)
	return resp, nil
}

// watchedKind is the report kind of req: a receive is a GET on a queue's
// messages that is not a peek (see classify), a properties read a GET of
// the queue with comp=metadata; "" for any other request.
func watchedKind(req *http.Request) string {
	if op, _, _ := classify(req); op == opReceive {
		return pauseWorkerReceive
	}
	if req.Method == http.MethodGet && req.URL.Query().Get("comp") == "metadata" {
		return pauseWorkerRead
	}
	return ""
}
