package dashboard

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/azdispatch/azdispatch"
)

// pages holds a template set per page, each the layout with the page's
// content.
type pages struct {
	sets map[string]*template.Template
}

// pageNames are the pages, each templates/<name>.html defining "content".
var pageNames = []string{"overview", "poison", "payloads", "schedules", "latency", "listeners", "cost", "confirm", "jobs", "message", "status"}

func parsePages() (*pages, error) {
	base, err := template.New("layout").Funcs(funcs).ParseFS(files, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	p := &pages{sets: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if _, err := t.ParseFS(files, "templates/"+name+".html"); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		p.sets[name] = t
	}
	return p, nil
}

// pageData is what the layout needs besides the page's own data.
type pageData struct {
	Title   string
	Nav     string // the page, for the navigation's aria-current
	Refresh int    // seconds between refreshes; 0 for a page that must not refresh itself
	Write   bool   // the request may take actions
	ReadAgo string // how old the reading shown is
	Notice  string // a line above the page: what an action did
	Body    any
}

// render writes page name with data, or a plain error if the template
// fails (before anything was written, since it renders into a buffer).
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	if d.Refresh == 0 && h.opts.Refresh > 0 && name != "confirm" && name != "message" {
		d.Refresh = max(int(h.opts.Refresh/time.Second), 1)
	}
	if name == "confirm" || name == "message" {
		d.Refresh = 0
	}
	var buf bytes.Buffer
	if err := h.pages.sets[name].ExecuteTemplate(&buf, "layout", d); err != nil {
		h.opts.Logger.Error("dashboard: rendering a page", "page", name, "err", err)
		http.Error(w, "The page could not be rendered.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers with a short page saying what went wrong.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "message", pageData{Title: http.StatusText(status), Write: h.writable(r), Body: msg})
}

var funcs = template.FuncMap{
	"finished": func(g *azdispatch.GroupStatus) int { return g.Succeeded + g.Failed },
	"count": func(v val) string {
		if !v.OK {
			return "—"
		}
		return strconv.FormatInt(v.N, 10)
	},
	"age": func(v val) string {
		if !v.OK {
			return "—"
		}
		return fmtDuration(time.Duration(v.N))
	},
	"dur":   fmtDuration,
	"stamp": stamp,
	"bytes": fmtBytes,
}

// fmtDuration is a duration as a person reads it: "0 s", "42 s", "3 min 5 s", "2 h 10 min".
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDuration(-d)
	case d < time.Second:
		if d == 0 {
			return "0 s"
		}
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
}

// stamp is a time in UTC to the second; "—" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func fmtBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
