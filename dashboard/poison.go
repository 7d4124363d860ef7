package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// poisonEntry is one message of a poison queue: an envelope, or a message
// that is not one.
type poisonEntry struct {
	PoisonQueue string // the poison queue it is in
	PoisonID    string // its own ID there
	Env         *azdispatch.PoisonEnvelope
	Text        string // the text of a message that is not an envelope
}

// poisonReading is a peek at the front of every poison queue.
type poisonReading struct {
	Entries []poisonEntry
	Full    []string // poison queues whose peek came back full: more may be behind
	Errors  []string
}

// readPoison peeks at up to azdispatch.MaxBatch messages of each poison
// queue, one request each: the service lets a peek see no further.
func (h *Handler) readPoison(ctx context.Context) poisonReading {
	ctx, cancel := withReadDeadline(ctx)
	defer cancel()
	var out poisonReading
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, readParallel)
	for _, u := range h.topo.units {
		peek := u.poisonCaps.Peek
		if u.poison == nil || peek == nil {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			msgs, err := peek(ctx, azdispatch.MaxBatch)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.Errors = append(out.Errors, u.poison.Name()+": "+readError(ctx, err))
			}
			if len(msgs) >= azdispatch.MaxBatch {
				out.Full = append(out.Full, u.poison.Name())
			}
			for _, m := range msgs {
				e := poisonEntry{PoisonQueue: u.poison.Name(), PoisonID: m.ID}
				if env, err := azdispatch.ParsePoison(m.Text); err == nil {
					e.Env = env
				} else {
					e.Text = m.Text
				}
				out.Entries = append(out.Entries, e)
			}
		})
	}
	wg.Wait()
	slices.Sort(out.Full)
	slices.Sort(out.Errors)
	return out
}

// poisonFilter picks envelopes by reason (a substring, any case), source
// queue and age (poisoned at least that long ago).
type poisonFilter struct {
	Reason string
	Source string
	Older  string // one of olderChoices' keys
}

// olderChoices are the ages a filter may ask for: a fixed set, so that no
// duration a client makes up is parsed.
var olderChoices = []struct {
	Key, Label string
	D          time.Duration
}{
	{"", "any age", 0},
	{"5m", "older than 5 minutes", 5 * time.Minute},
	{"1h", "older than an hour", time.Hour},
	{"1d", "older than a day", 24 * time.Hour},
	{"7d", "older than a week", 7 * 24 * time.Hour},
}

func readFilter(get func(string) string) poisonFilter {
	f := poisonFilter{Reason: bounded(strings.TrimSpace(get("reason")), 200), Source: bounded(get("source"), 200)}
	for _, c := range olderChoices {
		if c.Key == get("older") {
			f.Older = c.Key
		}
	}
	return f
}

func (f poisonFilter) olderThan() time.Duration {
	for _, c := range olderChoices {
		if c.Key == f.Older {
			return c.D
		}
	}
	return 0
}

// empty says whether the filter picks every envelope (for the template).
func (f poisonFilter) Empty() bool { return f.Reason == "" && f.Source == "" && f.Older == "" }

// match reports whether env passes the filter at now.
func (f poisonFilter) match(env *azdispatch.PoisonEnvelope, now time.Time) bool {
	if env == nil {
		return false
	}
	if f.Source != "" && env.Queue != f.Source {
		return false
	}
	if f.Reason != "" && !reasonMatches(env.Reason, f.Reason) {
		return false
	}
	if d := f.olderThan(); d > 0 && now.Sub(env.PoisonedAt) < d {
		return false
	}
	return true
}

// reasonMatches says whether a filter's text is in a reason, or in its
// shape: a group's link filters by its shape ("… order <n>"), which no
// reason holds as such.
func reasonMatches(reason, filter string) bool {
	f := foldReason(filter)
	return strings.Contains(foldReason(reason), f) || strings.Contains(foldReason(reasonShape(reason)), f)
}

// foldReason is a reason as the filter compares it: in lower case, with
// any byte that is not UTF-8 replaced and runs of white space made one
// space, so that a filter typed, or cut from a long reason for a group's
// link, matches what it was taken from.
func foldReason(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(strings.ToValidUTF8(s, "\uFFFD"))), " ")
}

// describe says in words what the filter picks.
func (f poisonFilter) describe() string {
	var parts []string
	if f.Reason != "" {
		parts = append(parts, "reason containing “"+f.Reason+"”")
	}
	if f.Source != "" {
		parts = append(parts, "from "+f.Source)
	}
	for _, c := range olderChoices {
		if c.Key == f.Older && c.Key != "" {
			parts = append(parts, "poisoned "+c.Label)
		}
	}
	if len(parts) == 0 {
		return "every poison message"
	}
	return "every poison message with " + strings.Join(parts, ", ")
}

func (f poisonFilter) values() map[string]string {
	return map[string]string{"reason": f.Reason, "source": f.Source, "older": f.Older}
}

// poisonRow is one envelope as the page shows it.
type poisonRow struct {
	poisonEntry
	Age      time.Duration
	Item     string // "batch/item" for a batch item
	Body     bodyView
	Selected bool // matches the filter
}

// reasonGroup is the envelopes whose reasons have one shape (see
// reasonShape), with a few of those reasons as examples.
type reasonGroup struct {
	Shape    string
	Count    int
	Examples []string // distinct reasons of the group, at most maxExamples
	More     int      // distinct reasons not shown
	Href     string
}

// maxExamples bounds the reasons a group shows.
const maxExamples = 3

type poisonBody struct {
	Rows       []poisonRow
	Invalid    []poisonEntry
	Groups     []reasonGroup
	Cols       []column
	Filter     poisonFilter
	FilterText string
	Sources    []string
	Older      []struct{ Key, Label string }
	Full       []string
	Errors     []string
	Reveal     bool
	View       string
	Views      []string
	RevealHref string
	ViewHrefs  map[string]string
	Total      int
	Limit      int
}

var poisonKeys = []string{"reason", "source", "", "count", "age", "", ""}

func (h *Handler) servePoison(w http.ResponseWriter, r *http.Request) {
	rd, at, err := h.poison.get(r.Context())
	if err != nil {
		return
	}
	q := r.URL.Query()
	now := h.opts.Now()
	b := poisonBody{Filter: readFilter(q.Get), Reveal: q.Get("reveal") == "1", View: bodyViewName(q.Get("view")), Views: bodyViews,
		Full: rd.Full, Errors: rd.Errors, Limit: azdispatch.MaxBatch}
	b.FilterText = b.Filter.describe()
	for _, c := range olderChoices {
		b.Older = append(b.Older, struct{ Key, Label string }{c.Key, c.Label})
	}
	for _, s := range h.topo.units {
		b.Sources = append(b.Sources, s.name)
	}
	groups := map[string]*reasonGroup{}
	examples := map[string]map[string]bool{}
	for _, e := range rd.Entries {
		if e.Env == nil {
			b.Invalid = append(b.Invalid, e)
			continue
		}
		b.Total++
		shape := reasonShape(e.Env.Reason)
		g := groups[shape]
		if g == nil {
			g = &reasonGroup{Shape: shape}
			groups[shape] = g
			examples[shape] = map[string]bool{}
		}
		g.Count++
		if !examples[shape][e.Env.Reason] {
			examples[shape][e.Env.Reason] = true
			if len(g.Examples) < maxExamples {
				g.Examples = append(g.Examples, e.Env.Reason)
			} else {
				g.More++
			}
		}
		if !b.Filter.match(e.Env, now) {
			continue
		}
		row := poisonRow{poisonEntry: e, Age: now.Sub(e.Env.PoisonedAt).Round(time.Second)}
		if e.Env.Batch != "" {
			row.Item = e.Env.Batch + "/" + strconv.Itoa(e.Env.Item)
		}
		if b.Reveal {
			row.Body = decodeBody(e.Env.Body, b.View, h.opts.Codec)
		}
		b.Rows = append(b.Rows, row)
	}
	for shape, g := range groups {
		gq := keep(q)
		gq.Set("reason", bounded(shape, 200))
		g.Href = "poison?" + gq.Encode()
		slices.Sort(g.Examples)
		b.Groups = append(b.Groups, *g)
	}
	slices.SortFunc(b.Groups, func(x, y reasonGroup) int {
		if x.Count != y.Count {
			return y.Count - x.Count
		}
		return strings.Compare(x.Shape, y.Shape)
	})
	sortKey := readSort(r, poisonKeys, sortSpec{key: "reason"})
	slices.SortStableFunc(b.Rows, func(x, y poisonRow) int {
		switch sortKey.key {
		case "source":
			return byString(x.Env.Queue, y.Env.Queue, sortKey.desc)
		case "count":
			return byVal(got(x.Env.DequeueCount), got(y.Env.DequeueCount), sortKey.desc)
		case "age":
			return byVal(got(int64(x.Age)), got(int64(y.Age)), sortKey.desc)
		}
		if c := byString(x.Env.Reason, y.Env.Reason, sortKey.desc); c != 0 {
			return c
		}
		return x.Env.PoisonedAt.Compare(y.Env.PoisonedAt)
	})
	b.Cols = columns(r, "poison", poisonKeys,
		[]string{"Reason", "Source queue", "Message ID", "Dequeues", "Age", "Poisoned at", "Batch item"},
		[]bool{false, false, false, true, true, false, false}, sortKey)
	rq := keep(q)
	if b.Reveal {
		rq.Del("reveal")
	} else {
		rq.Set("reveal", "1")
	}
	b.RevealHref = "poison?" + rq.Encode()
	b.ViewHrefs = map[string]string{}
	for _, v := range bodyViews {
		vq := keep(q)
		vq.Set("reveal", "1")
		vq.Set("view", v)
		b.ViewHrefs[v] = "poison?" + vq.Encode()
	}
	h.render(w, r, http.StatusOK, "poison", pageData{
		Title: "Poison messages", Nav: "poison", Write: h.writable(r), ReadAgo: fmtDuration(h.since(at)),
		Notice: notice(r), Body: b,
	})
}
