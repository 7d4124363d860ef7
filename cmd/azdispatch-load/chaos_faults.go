package main

import (
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Fault kinds, as the chaos record counts them.
const (
	fault503         = "503"
	fault500         = "500"
	faultLostReceive = "lost_receive"
	faultLostDelete  = "lost_delete"
	faultLostUpdate  = "lost_update"
	faultLostSend    = "lost_send"
	faultLostBlob    = "lost_blob_write" // an Append Block or Put Blob, done, its answer lost
	faultHang        = "hang"
	faultKill        = "kill"
	faultStorm       = "storm"
	// faultStorm503 is one 503 answer of a storm; a storm is one episode.
	faultStorm503 = "storm_503"
)

// faultKinds are the kinds every chaos run must inject, in record order.
var faultKinds = []string{fault503, fault500, faultLostReceive, faultLostDelete, faultLostUpdate, faultLostSend, faultHang, faultKill, faultStorm}

// faultRates are the chances of each fault a transport injects while calm.
type faultRates struct {
	ServerBusy  float64 `json:"server_busy"` // of requests: a synthetic 503 ServerBusy, request not made
	Timeout     float64 `json:"timeout"`     // of requests: a synthetic 500 OperationTimedOut, request not made
	RetryAfter  float64 `json:"retry_after"` // of those answers: with Retry-After: 1
	LostReceive float64 `json:"lost_receive"`
	LostDelete  float64 `json:"lost_delete"`
	LostUpdate  float64 `json:"lost_update"`
	LostSend    float64 `json:"lost_send"`
	// Blob writes (Append Block, Put Blob: a group's marks, once-marks,
	// records): of those requests, a synthetic 503 not made, and of those
	// done, the answer lost. Zero in every scenario but groups.
	BlobBusy float64 `json:"blob_busy,omitempty"`
	LostBlob float64 `json:"lost_blob,omitempty"`
}

// faultMode is what a transport does now. The coordinator switches it.
type faultMode int32

const (
	modeCalm         faultMode = iota // random faults at the configured rates
	modeQuiet                         // none: the drain, and a storm's target while its memory empties
	modeStormTarget                   // every delete answers 503, nothing else is touched
	modeStormRefused                  // every receive answers 503, nothing else is touched
)

var modeNames = map[string]faultMode{"calm": modeCalm, "quiet": modeQuiet, "storm-target": modeStormTarget, "storm-refused": modeStormRefused}

func (m faultMode) String() string {
	for k, v := range modeNames {
		if v == m {
			return k
		}
	}
	return fmt.Sprintf("mode(%d)", int32(m))
}

// requestOp is what a queue request does, read off its method and path.
type requestOp int

const (
	opOther requestOp = iota
	opReceive
	opDelete
	opUpdate
	opSend
	opBlobWrite // Append Block, or Put Blob
)

// classify reads what req does: the queue service's REST paths are
// /<account>/<queue>/messages for receives and sends and
// /<account>/<queue>/messages/<id> for deletes and updates. It also returns
// the queue and, for deletes and updates, the message ID.
func classify(req *http.Request) (op requestOp, queue, id string) {
	if req.Method == http.MethodPut && (req.URL.Query().Get("comp") == "appendblock" || req.Header.Get("x-ms-blob-type") != "" && req.URL.Query().Get("comp") == "") {
		return opBlobWrite, "", ""
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	n := len(parts)
	switch {
	case n >= 2 && parts[n-1] == "messages":
		queue = parts[n-2]
		switch {
		case req.Method == http.MethodGet && req.URL.Query().Get("peekonly") == "":
			return opReceive, queue, ""
		case req.Method == http.MethodPost:
			return opSend, queue, ""
		}
	case n >= 3 && parts[n-2] == "messages":
		queue, id = parts[n-3], parts[n-1]
		switch req.Method {
		case http.MethodDelete:
			return opDelete, queue, id
		case http.MethodPut:
			return opUpdate, queue, id
		}
	}
	return opOther, queue, id
}

// lockedRand is a seeded source shared by goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newLockedRand(seed int64, stream uint64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(uint64(seed), stream))}
}

// chance reports true with probability p.
func (l *lockedRand) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64() < p
}

// between returns a duration drawn uniformly from [lo, hi].
func (l *lockedRand) between(lo, hi time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(l.r.Int64N(int64(hi-lo)))
}

// float returns a number in [0, 1).
func (l *lockedRand) float() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// perm returns a random permutation of [0, n).
func (l *lockedRand) perm(n int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Perm(n)
}

// intN returns a number in [0, n).
func (l *lockedRand) intN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// faultTransport injects faults between the Azure SDK and the network, in
// the SDK's Transport slot, so that the SDK's retry policy and the library
// above it see them as they would see the service's:
//
//   - a synthetic 503 ServerBusy or 500 OperationTimedOut, with the
//     service's error body and x-ms-error-code header, and sometimes
//     Retry-After, for a request that was never made;
//   - a lost response: the request is made and the service acts on it (a
//     receive hides its messages and raises their dequeue counts, a delete
//     deletes, an update changes the pop receipt, a send enqueues), then
//     the SDK gets a transport error instead of the answer.
type faultTransport struct {
	next   policy.Transporter
	rng    *lockedRand
	rates  faultRates
	mode   atomic.Int32 // a faultMode
	spared string       // queues whose names end in it are never given lost responses (poison queues), or ""

	// note is told of every fault injected, with the request and, for
	// deletes and updates, the message ID; it must be safe for concurrent
	// use.
	note func(req *http.Request, kind string, op requestOp, id string)
	// received, if set, is given the body of every receive that succeeded.
	received func(body []byte)
}

func (f *faultTransport) setMode(m faultMode) { f.mode.Store(int32(m)) }

func (f *faultTransport) Do(req *http.Request) (*http.Response, error) {
	op, queue, id := classify(req)
	switch faultMode(f.mode.Load()) {
	case modeStormTarget:
		if op == opDelete {
			f.note(req, faultStorm503, op, id)
			return serviceError(req, http.StatusServiceUnavailable, "ServerBusy", false), nil
		}
		return f.pass(req)
	case modeStormRefused:
		if op == opReceive {
			f.note(req, faultStorm503, op, id)
			return serviceError(req, http.StatusServiceUnavailable, "ServerBusy", false), nil
		}
		return f.pass(req)
	case modeQuiet:
		return f.pass(req)
	}
	if op == opBlobWrite && f.rng.chance(f.rates.BlobBusy) {
		f.note(req, fault503, op, id)
		return serviceError(req, http.StatusServiceUnavailable, "ServerBusy", f.rng.chance(f.rates.RetryAfter)), nil
	}
	if op != opOther && op != opBlobWrite {
		switch {
		case f.rng.chance(f.rates.ServerBusy):
			f.note(req, fault503, op, id)
			return serviceError(req, http.StatusServiceUnavailable, "ServerBusy", f.rng.chance(f.rates.RetryAfter)), nil
		case f.rng.chance(f.rates.Timeout):
			f.note(req, fault500, op, id)
			return serviceError(req, http.StatusInternalServerError, "OperationTimedOut", f.rng.chance(f.rates.RetryAfter)), nil
		}
	}
	resp, err := f.pass(req)
	if err != nil || (f.spared != "" && strings.HasSuffix(queue, f.spared)) {
		return resp, err
	}
	kind, rate, acted := "", 0.0, false
	switch op {
	case opReceive:
		kind, rate, acted = faultLostReceive, f.rates.LostReceive, resp.StatusCode == http.StatusOK
	case opDelete:
		kind, rate, acted = faultLostDelete, f.rates.LostDelete, resp.StatusCode == http.StatusNoContent
	case opUpdate:
		kind, rate, acted = faultLostUpdate, f.rates.LostUpdate, resp.StatusCode == http.StatusNoContent
	case opSend:
		kind, rate, acted = faultLostSend, f.rates.LostSend, resp.StatusCode == http.StatusCreated
	case opBlobWrite:
		kind, rate, acted = faultLostBlob, f.rates.LostBlob, resp.StatusCode == http.StatusCreated
	}
	if !acted || !f.rng.chance(rate) {
		return resp, nil
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		return nil, rerr
	}
	if op == opReceive && !bytes.Contains(body, []byte("<QueueMessage>")) {
		// An empty receive changed nothing: losing it would test nothing.
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	f.note(req, kind, op, id)
	return nil, errLostResponse
}

// pass makes the request, and shows a successful receive's body to
// f.received.
func (f *faultTransport) pass(req *http.Request) (*http.Response, error) {
	resp, err := f.next.Do(req)
	if err != nil || f.received == nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	if op, _, _ := classify(req); op != opReceive {
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	f.received(body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// errLostResponse is what the SDK gets for a response that was lost after
// the service acted: to it, a connection reset while reading the answer.
var errLostResponse = errors.New("read: connection reset by peer (chaos: the service acted, its response was lost)")

// serviceError is a response as the queue service sends it when it is
// throttling (503 ServerBusy) or timed out (500 OperationTimedOut): an XML
// error body and the x-ms-error-code header, which the SDK reads, and with
// retryAfter a Retry-After header, which its retry policy honours.
func serviceError(req *http.Request, status int, code string, retryAfter bool) *http.Response {
	msg := "Operations per second is over the account limit."
	if code == "OperationTimedOut" {
		msg = "Operation could not be completed within the specified time."
	}
	reqID := newRequestID()
	now := time.Now().UTC()
	body := fmt.Sprintf("<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>%s</Code><Message>%s\nRequestId:%s\nTime:%s</Message></Error>",
		code, msg, reqID, now.Format("2006-01-02T15:04:05.0000000Z"))
	h := http.Header{}
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	h.Set("Server", "Windows-Azure-Queue/1.0 Microsoft-HTTPAPI/2.0")
	h.Set("x-ms-request-id", reqID)
	h.Set("x-ms-version", "2018-03-28")
	h.Set("x-ms-error-code", code)
	h.Set("Date", now.Format(http.TimeFormat))
	if retryAfter {
		h.Set("Retry-After", "1")
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// newRequestID is a request ID in the service's format (a UUID).
func newRequestID() string {
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	s := hex.EncodeToString(b)
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}
