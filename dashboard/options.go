package dashboard

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Options configures a [Handler]. Nil, or a zero field, means the documented
// default.
type Options struct {
	// Sources are the queues the dashboard shows: [*azdispatch.Queue]s,
	// [*azdispatch.ShardedQueue]s (each shard shown on its own too),
	// [*azdispatch.QueueSet]s (each queue shown on its own too, with its
	// share of the messages received), or any [azdispatch.Shard] (a
	// memqueue.Queue in tests). Poison queues are found through
	// [azdispatch.PoisonQueuer], accounts through the queues' Account
	// method. At least one is required; each is a Shard, or has Shards (see
	// [azdispatch.Capabilities]).
	Sources []azdispatch.Source

	// Payloads is the payload store whose payloads and schedules are shown.
	// Defaults to the first source's (see [azdispatch.PayloadStorer]); with
	// none, those pages say so.
	Payloads *azdispatch.PayloadStore

	// Codec decodes message bodies for the poison browser's decoded view.
	// Defaults to [azdispatch.JSON], whose decoded value is shown as
	// indented JSON.
	Codec azdispatch.Codec

	// Write enables the actions: requeue, purge, test sends, sweeps, and
	// the pauses and resumes of queues and schedules (and a schedule's run
	// now).
	// Defaults to false: read-only, as a dashboard left open should be.
	Write bool

	// ReadOnly, if set, is asked on every request when Write is set: true
	// makes that request read-only (no action shown, and a POST refused).
	// It lets a service with its own authorization give actions to some
	// users only. Ignored when Write is false.
	ReadOnly func(*http.Request) bool

	// CacheFor is how long one reading of the queues serves every viewer:
	// one reading per CacheFor however many pages are open. Defaults to
	// 10 s; at least 1 s.
	CacheFor time.Duration

	// Refresh is how often an open page refreshes itself (with JavaScript;
	// it pauses while the tab is hidden, or on the pause button). Defaults
	// to 10 s; negative turns it off.
	Refresh time.Duration

	// TargetAge is the oldest-message age the latency page measures each
	// queue against. Defaults to none: ages are shown without a target.
	TargetAge time.Duration

	// PricePer10K is the price of 10,000 storage transactions, in
	// Currency, for the cost page. Prices differ by region and redundancy
	// and change, so there is no default: zero shows counts only, and a
	// viewer can set a price on the page.
	PricePer10K float64

	// Currency labels prices. Defaults to "$".
	Currency string

	// Logger receives the dashboard's logs (actions taken, failed
	// readings). Defaults to none.
	Logger *slog.Logger

	// Now is the clock, for tests. Defaults to [time.Now].
	Now func() time.Time
}

// Defaults.
const (
	defaultCacheFor = 10 * time.Second
	defaultRefresh  = 10 * time.Second
	// window is how far back sparklines and hourly rates look.
	window = time.Hour
)

// withDefaults validates o and fills in its defaults.
func (o *Options) withDefaults() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	if len(out.Sources) == 0 {
		return out, &azdispatch.ConfigError{Field: "dashboard.Options.Sources", Reason: "empty: the dashboard needs a queue to show"}
	}
	for i, s := range out.Sources {
		if s == nil {
			return out, &azdispatch.ConfigError{Field: fmt.Sprintf("dashboard.Options.Sources[%d]", i), Reason: "nil"}
		}
		if _, ok := s.(azdispatch.Shard); !ok && azdispatch.CapabilitiesOf(s).Shards == nil {
			return out, &azdispatch.ConfigError{Field: fmt.Sprintf("dashboard.Options.Sources[%d]", i),
				Reason: fmt.Sprintf("%s is neither a queue one can send to (a Shard) nor a set of them (with Shards)", s.Name())}
		}
	}
	switch {
	case out.CacheFor == 0:
		out.CacheFor = defaultCacheFor
	case out.CacheFor < time.Second:
		return out, &azdispatch.ConfigError{Field: "dashboard.Options.CacheFor", Reason: "under 1 s: every viewer would cost requests"}
	}
	if out.Refresh == 0 {
		out.Refresh = defaultRefresh
	}
	if out.TargetAge < 0 {
		return out, &azdispatch.ConfigError{Field: "dashboard.Options.TargetAge", Reason: "negative"}
	}
	if out.PricePer10K < 0 || math.IsNaN(out.PricePer10K) || math.IsInf(out.PricePer10K, 0) {
		return out, &azdispatch.ConfigError{Field: "dashboard.Options.PricePer10K", Reason: "not a price"}
	}
	if out.Currency == "" {
		out.Currency = "$"
	}
	if out.Codec == nil {
		out.Codec = azdispatch.JSON()
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out, nil
}
