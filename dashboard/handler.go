package dashboard

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

//go:embed templates/*.html static/*
var files embed.FS

// Handler serves the dashboard. Make one with [New], mount it under a
// prefix with [http.StripPrefix] (the prefix without its trailing slash),
// and [Handler.Close] it when the service stops: Close ends the
// background jobs it runs (a requeue of every matching message, a sweep)
// and waits for them.
//
// It is safe for concurrent use.
type Handler struct {
	opts  Options
	topo  *topology
	pages *pages
	root  http.Handler

	overview  *cache[overviewReading]
	poison    *cache[poisonReading]
	payloads  *cache[payloadReading]
	schedules *cache[scheduleReading]
	hist      *history
	costs     costHistory
	own       tally // the dashboard's own requests

	listeners registry
	jobs      *jobs

	ctx    context.Context // ends on Close: background jobs run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
}

// New returns a dashboard over opts.Sources. It makes no request: the
// first page viewed takes the first reading.
func New(opts *Options) (*Handler, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	h := &Handler{opts: o, topo: newTopology(&o), pages: p, hist: newHistory(o.CacheFor)}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.jobs = newJobs(h.ctx, &h.wg, o.Now, o.Logger)
	h.overview = newCache(o.CacheFor, o.Now, h.readOverview)
	h.poison = newCache(o.CacheFor, o.Now, h.readPoison)
	h.payloads = newCache(o.CacheFor, o.Now, h.readPayloads)
	h.schedules = newCache(o.CacheFor, o.Now, h.readSchedules)
	h.root = h.routes()
	return h, nil
}

// ServeHTTP serves the dashboard's pages, assets and actions.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.root.ServeHTTP(w, r)
}

// Close stops the background jobs the dashboard runs and waits for them
// to end. A job stopped so reports how far it got; what it had not moved
// stays where it was. Pages served after Close still read, but start no
// job.
func (h *Handler) Close() error {
	h.closed.Do(func() {
		h.cancel()
		h.wg.Wait()
	})
	return nil
}

// Transactions returns the storage requests the dashboard itself has made:
// its readings and its actions.
func (h *Handler) Transactions() azdispatch.Transactions { return h.own.get() }

// contentSecurityPolicy allows the dashboard's own script, stylesheet and
// images and nothing else: no inline script or style, no frame, no form
// posting elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// maxBody bounds a form's body: the largest is a test message's text.
const maxBody = 128 << 10

func (h *Handler) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(files, "static") // cannot fail: the directory is embedded
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", h.serveOverview)
	mux.HandleFunc("GET /poison", h.servePoison)
	mux.HandleFunc("GET /payloads", h.servePayloads)
	mux.HandleFunc("GET /schedules", h.serveSchedules)
	mux.HandleFunc("GET /latency", h.serveLatency)
	mux.HandleFunc("GET /listeners", h.serveListeners)
	mux.HandleFunc("GET /cost", h.serveCost)
	mux.HandleFunc("GET /confirm", h.serveConfirm)
	mux.HandleFunc("GET /jobs", h.serveJobs)
	mux.HandleFunc("POST /act", h.serveAct)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "No such page.")
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusForbidden, "Refused: a cross-origin request may not change anything.")
	}))
	protected := cop.Handler(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		hd.Set("X-Frame-Options", "DENY")
		if r.URL.Path == "" {
			// Mounted at "/prefix" and asked for "/prefix": every link is
			// relative to "/prefix/", so go there.
			http.Redirect(w, r, redirectToSlash(r), http.StatusMovedPermanently)
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/") {
			// Stripped with its trailing slash: put the slash back.
			r2 := *r
			u := *r.URL
			u.Path = "/" + u.Path
			u.RawPath = ""
			r2.URL = &u
			r = &r2
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		protected.ServeHTTP(w, r)
	})
}

// redirectToSlash is the request's own path, as the client sent it, with a
// slash after it.
func redirectToSlash(r *http.Request) string {
	p := r.RequestURI
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if p == "" || strings.Contains(p, "://") || strings.HasPrefix(p, "//") {
		return "./"
	}
	return p + "/"
}

// writable says whether r may take actions.
func (h *Handler) writable(r *http.Request) bool {
	if !h.opts.Write {
		return false
	}
	return h.opts.ReadOnly == nil || !h.opts.ReadOnly(r)
}

// readingAge is how long ago a reading was taken, for a page's footer.
func (h *Handler) since(at time.Time) time.Duration {
	return h.opts.Now().Sub(at).Round(time.Second)
}
