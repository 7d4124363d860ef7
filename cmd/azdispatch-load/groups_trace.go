package main

import (
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// groupsTrace is a worker's transport that reports, for the big variant,
// when each step of a group's completion went out and came back: appends
// to a group's blobs, reads of them, and sends to the continuations'
// queue. The coordinator keeps each group's last of each kind, to say
// where the time between the last child's end and its continuation goes.
type groupsTrace struct {
	next   policy.Transporter
	done   string // the continuations' queue
	report func(groupsReport)
}

func (g *groupsTrace) Do(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := g.next.Do(req)
	path := req.URL.Path
	var what, group string
	switch i := strings.Index(path, "/groups/"); {
	case i >= 0:
		rest := path[i+len("/groups/"):]
		group, _, _ = strings.Cut(rest, "/")
		shard := strings.Contains(rest, "/")
		switch {
		case req.Method == http.MethodPut && req.URL.Query().Get("comp") == "appendblock" && shard:
			what = "shard-append"
		case req.Method == http.MethodPut && req.URL.Query().Get("comp") == "appendblock":
			what = "head-append"
		case req.Method == http.MethodGet && shard:
			what = "shard-read"
		case req.Method == http.MethodGet:
			what = "head-read"
		}
	case req.Method == http.MethodPost && strings.HasSuffix(path, "/"+g.done+"/messages"):
		what = "next-send"
	}
	if what != "" {
		g.report(groupsReport{Kind: "trace", What: what, G: group, At: start.UnixNano(), Done: time.Now().UnixNano()})
	}
	return resp, err
}
