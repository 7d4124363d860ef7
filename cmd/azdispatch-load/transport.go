package main

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// latencyTransport adds a fixed delay to every request, standing in for the
// network round trip to a real account (loopback has none).
type latencyTransport struct {
	next  policy.Transporter
	delay time.Duration
}

func (l latencyTransport) Do(req *http.Request) (*http.Response, error) {
	if l.delay > 0 {
		t := time.NewTimer(l.delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		}
	}
	return l.next.Do(req)
}

// newHTTPClient is the transport every variant uses, so that they differ only
// in how they drive the queue: enough idle connections for parallel deletes.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// attempts counts HTTP attempts by method in the SDK's per-retry slot, for
// the hand-written loops that do not go through azdispatch's counters.
type attempts struct {
	get, delete, put, post atomic.Int64
}

func (a *attempts) Do(req *policy.Request) (*http.Response, error) {
	switch req.Raw().Method {
	case http.MethodGet:
		a.get.Add(1)
	case http.MethodDelete:
		a.delete.Add(1)
	case http.MethodPut:
		a.put.Add(1)
	case http.MethodPost:
		a.post.Add(1)
	}
	return req.Next()
}
