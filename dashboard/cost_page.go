package dashboard

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// minRateWindow is the shortest window an hourly rate is worked out
// from: a few seconds' count says nothing of an hour (one reading in 2 s
// would read as tens of thousands of requests an hour). Until the window
// reaches it, the page shows the counts over the window, and says how long
// the window is.
const minRateWindow = time.Minute

// costRow is one kind of transaction on the cost page.
type costRow struct {
	Kind, About       string
	All, Own          int64 // in the window; Own is a part of All
	AllHour, OwnHour  string
	AllPrice, OwnCost string
	Part              bool
}

type costBody struct {
	Rows        []costRow
	Total       costRow
	Window      time.Duration
	Rated       bool   // the window is long enough for rates per hour
	RatesAfter  string // minRateWindow, in words
	Price       string // per 10,000, as set
	Currency    string
	Priced      bool
	Accounts    []string // each account's name and host
	OwnEachRead string
	CacheFor    time.Duration
}

// readPrice is the price per 10,000 a viewer set on the page, else the
// option's: a number from 0 to 1,000.
func (h *Handler) readPrice(r *http.Request) float64 {
	if s := bounded(r.URL.Query().Get("price"), 20); s != "" {
		if p, err := strconv.ParseFloat(s, 64); err == nil && p >= 0 && p <= 1000 {
			return p
		}
	}
	return h.opts.PricePer10K
}

func (h *Handler) serveCost(w http.ResponseWriter, r *http.Request) {
	now := h.opts.Now()
	h.costs.sample(now, h.totals) // free: counters in this process
	first, last, _ := h.costs.span()
	price := h.readPrice(r)
	b := costBody{Currency: h.opts.Currency, Priced: price > 0, CacheFor: h.opts.CacheFor, RatesAfter: fmt.Sprintf("%g min", minRateWindow.Minutes())}
	if price > 0 {
		b.Price = strconv.FormatFloat(price, 'f', -1, 64)
	}
	for _, a := range h.topo.accounts {
		b.Accounts = append(b.Accounts, a.Name()+" at "+a.Host())
	}
	span := last.at.Sub(first.at)
	b.Window = span.Round(time.Second)
	b.Rated = span >= minRateWindow
	own, all := shares(first, last)
	perHour := func(n int64) float64 { return float64(n) * float64(time.Hour) / float64(span) }
	mk := func(kind, about string, a, o int64, part bool) costRow {
		row := costRow{Kind: kind, About: about, All: a, Own: o, Part: part,
			AllHour: "—", OwnHour: "—", AllPrice: "—", OwnCost: "—"}
		if b.Rated {
			row.AllHour = fmt.Sprintf("%.0f", perHour(a))
			row.OwnHour = fmt.Sprintf("%.0f", perHour(o))
			if price > 0 {
				row.AllPrice = fmt.Sprintf("%s%.4f", h.opts.Currency, perHour(a)/10000*price)
				row.OwnCost = fmt.Sprintf("%s%.4f", h.opts.Currency, perHour(o)/10000*price)
			}
		}
		return row
	}
	var ta, to int64
	for _, k := range kinds {
		a, o := k.get(all), k.get(own)
		b.Rows = append(b.Rows, mk(k.name, k.about, a, o, k.part))
		if !k.part {
			ta += a
			to += o
		}
	}
	b.Total = mk("total", "", ta, to, false)
	b.OwnEachRead = fmt.Sprintf("%d", 3*len(h.topo.units))
	h.render(w, r, http.StatusOK, "cost", pageData{
		Title: "Cost", Nav: "cost", Write: h.writable(r), ReadAgo: "0 s", Body: b,
	})
}
