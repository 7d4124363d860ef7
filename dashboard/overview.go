package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch"
)

// ovRow is one row of the overview: a queue, a sharded set, a shard or an
// account.
type ovRow struct {
	Name, Kind string
	Set        string // a shard's set
	// Host is the endpoint's host (and port) of a queue, shard or account
	// ("" for a queue without one, as a memqueue), and Where says it with
	// the account's name: two accounts of one name (two emulators, one
	// name in two clouds) differ in it. Never more than a host: no URL,
	// SAS or key.
	Host, Where                       string
	Depth, Poison, Age                val
	DepthSpark, PoisonSpark, AgeSpark template.HTML
	Health, HealthClass               string // a shard's health, in words
	// Share is, for a queue of a queue set, its share of the messages
	// the set received, its cap and its messages in hand, in words.
	Share   string
	AgeOver bool // older than Options.TargetAge
	Pause   pauseCell
}

type overviewBody struct {
	Sets, Shards, Accounts []ovRow
	SetCols, ShardCols     []column
	AccountCols            []column
	HealthNote             string
	Sources                []string // for the test send form
	Target                 time.Duration
}

var ovKeys = []string{"name", "", "depth", "poison", "age", "", "", "", ""}

func (h *Handler) serveOverview(w http.ResponseWriter, r *http.Request) {
	rd, at, err := h.overview.get(r.Context())
	if err != nil {
		return // the viewer left
	}
	now := h.opts.Now()
	from := now.Add(-window)
	spark := func(key, label string, f func(float64) string) template.HTML {
		return sparkline(h.hist.since(key, from), now, label, f)
	}
	num := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	ageFmt := func(v float64) string { return fmtDuration(time.Duration(v)) }
	row := func(prefix, key, name, kind string, ur unitReading) ovRow {
		return ovRow{
			Name: name, Kind: kind, Depth: ur.Depth, Poison: ur.Poison, Age: ur.Age,
			DepthSpark:  spark(prefix+"depth:"+key, "depth of "+name, num),
			PoisonSpark: spark(prefix+"poison:"+key, "poison depth of "+name, num),
			AgeSpark:    spark(prefix+"age:"+key, "oldest age in "+name, ageFmt),
			AgeOver:     h.opts.TargetAge > 0 && ur.Age.OK && time.Duration(ur.Age.N) > h.opts.TargetAge,
		}
	}
	sortKey := readSort(r, ovKeys, sortSpec{key: "name"})
	b := overviewBody{Target: h.opts.TargetAge,
		HealthNote: "Health is the sharded queue's own view of each shard (its breaker) in this process, and this page's reading of it: a shard out after failures, or one that did not answer (a hung account, a blackholed connection), is passed over by sends and receives until it is tried again, one request at a time. A shard this page could not read is never called healthy."}
	for _, s := range h.topo.sets {
		kind := "queue"
		switch {
		case s.shares != nil:
			kind = fmt.Sprintf("queue set (%d queues)", len(s.units))
		case s.isSharded():
			kind = fmt.Sprintf("sharded set (%d shards)", len(s.units))
		}
		sr := row("set-", s.name, s.name, kind, aggregate(rd, s.units))
		sr.Pause = h.pauseCell(r, rd, s.name, s.units, s.shares != nil)
		if len(s.units) == 1 && !s.isSharded() {
			sr.Host, sr.Where = s.units[0].where()
		} else {
			sr.Where = hostsOf(s.units)
		}
		b.Sets = append(b.Sets, sr)
		if _, ok := s.source.(azdispatch.Target); ok {
			b.Sources = append(b.Sources, s.name) // a queue set takes no sends of its own
		}
		if !s.isSharded() {
			continue
		}
		health := map[string]string{}
		classes := map[string]string{}
		if s.health != nil {
			for _, sh := range s.health() {
				switch {
				case sh.Healthy:
					health[sh.Shard], classes[sh.Shard] = "healthy", "ok"
				default:
					msg := fmt.Sprintf("out since %s, after %d failures", stamp(sh.Since), sh.Failures)
					if sh.RetryAt.IsZero() {
						msg += ", being tried again"
					} else {
						msg += ", to be tried again at " + stamp(sh.RetryAt)
					}
					if sh.LastError != nil {
						msg += ": " + cleanError(sh.LastError)
					}
					health[sh.Shard], classes[sh.Shard] = msg, "bad"
				}
			}
		}
		shares := shareWords(s)
		for _, u := range s.units {
			rr := row("", u.name, u.name, "shard", rd.Units[u.name])
			rr.Set = s.name
			if s.shares != nil {
				rr.Kind, rr.Share = "queue of a set", shares[u.name]
			}
			rr.Host, rr.Where = u.where()
			rr.Pause = h.pauseCell(r, rd, u.name, []*unit{u}, false)
			rr.Health, rr.HealthClass = health[u.name], classes[u.name]
			switch ur := rd.Units[u.name]; {
			case rr.HealthClass == "bad":
			case !ur.Depth.OK:
				// Healthy by the last requests, perhaps, but this page
				// could not read it: not healthy.
				rr.Health, rr.HealthClass = "not read by this page: "+ur.Depth.Err, "bad"
			case rr.Health == "":
				rr.Health, rr.HealthClass = "not known: this sharded source does not report its shards' health", "absent"
			}
			b.Shards = append(b.Shards, rr)
		}
	}
	for _, a := range h.topo.accounts {
		var us []*unit
		for _, u := range h.topo.units {
			if u.account == a {
				us = append(us, u)
			}
		}
		ar := row("account-", accountKey(a), a.Name(), fmt.Sprintf("account (%d queues)", len(us)), aggregate(rd, us))
		if ar.Host = a.Host(); ar.Host != "" {
			ar.Where = "at " + ar.Host
		}
		b.Accounts = append(b.Accounts, ar)
	}
	sortRows := func(rows []ovRow) {
		slices.SortStableFunc(rows, func(x, y ovRow) int {
			switch sortKey.key {
			case "depth":
				return byVal(x.Depth, y.Depth, sortKey.desc)
			case "poison":
				return byVal(x.Poison, y.Poison, sortKey.desc)
			case "age":
				return byVal(x.Age, y.Age, sortKey.desc)
			}
			return byString(x.Name, y.Name, sortKey.desc)
		})
	}
	sortRows(b.Sets)
	sortRows(b.Shards)
	sortRows(b.Accounts)
	labels := []string{"Name", "Kind", "Depth", "Poison", "Oldest age", "Pause", "Depth, last hour", "Poison, last hour", "Oldest age, last hour"}
	nums := []bool{false, false, true, true, true, false, false, false, false}
	b.SetCols = columns(r, "./", ovKeys, labels, nums, sortKey)
	b.ShardCols = columns(r, "./", ovKeys, labels, nums, sortKey)
	b.AccountCols = columns(r, "./", ovKeys, labels, nums, sortKey)
	h.render(w, r, http.StatusOK, "overview", pageData{
		Title: "Overview", Nav: "overview", Write: h.writable(r), ReadAgo: fmtDuration(h.since(at)),
		Notice: notice(r), Body: b,
	})
}

// pauseCell is the Pause column of the row named name, over units: what
// the reading found, and whether the viewer may pause or resume it there
// (a row that is a pause target: see pauseTarget).
func (h *Handler) pauseCell(r *http.Request, rd overviewReading, name string, units []*unit, queueSet bool) pauseCell {
	c := pauseWords(rd, units, queueSet)
	if t := h.topo.pausable[name]; t != nil && slices.Equal(t.units, units) {
		c.Target = t.name
		c.Act = h.writable(r)
	}
	return c
}

// where is the host of u's endpoint, and a line naming its account there:
// "account acct at 127.0.0.1:10001"; both "" for a queue with no host (a
// memqueue).
func (u *unit) where() (host, line string) {
	if u.caps.Host == nil || u.caps.Host() == "" {
		return "", ""
	}
	host = u.caps.Host()
	if u.account != nil {
		return host, "account " + u.account.Name() + " at " + host
	}
	return host, "at " + host
}

// hostsOf lists the distinct hosts of units' endpoints, for a sharded
// set's row: "on 127.0.0.1:10001, 127.0.0.1:10011"; "" when none has one.
func hostsOf(units []*unit) string {
	var hosts []string
	for _, u := range units {
		if h, _ := u.where(); h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return ""
	}
	return "on " + strings.Join(hosts, ", ")
}

// shareWords says, for each queue of a queue set, its share of the
// messages the set received, its cap and its messages in hand.
func shareWords(s *set) map[string]string {
	if s.shares == nil {
		return nil
	}
	states := s.shares()
	var total int64
	for _, st := range states {
		total += st.Received
	}
	out := make(map[string]string, len(states))
	for _, st := range states {
		share := "no message received yet"
		if total > 0 {
			share = fmt.Sprintf("%.0f %% of the %d messages received", 100*float64(st.Received)/float64(total), total)
		}
		limit := "no cap"
		if st.Cap > 0 {
			limit = fmt.Sprintf("cap %d", st.Cap)
		}
		if st.Weight > 0 {
			limit += fmt.Sprintf(", weight %d", st.Weight)
		}
		out[st.Queue] = fmt.Sprintf("%s; %d in hand (%s)", share, st.InHand, limit)
	}
	return out
}
