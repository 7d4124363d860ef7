package dashboard

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

//go:embed templates/*.html static/*
var files embed.FS

// Handler serves the dashboard. Make one with [New], mount it under a
// prefix with [http.StripPrefix] (the prefix without its trailing slash, so
// that the bare prefix redirects to "prefix/"; stripped with it, "prefix/"
// serves the overview just the same), and [Handler.Close] it when the
// service stops: Close ends the background jobs it runs (a requeue of every
// matching message, a sweep) and any reading under way, and waits for them.
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

	life *lifetime // ends on Close: background jobs and readings run under it
}

// lifetime is the handler's life: every goroutine the handler starts (a
// job, a shared reading) is started through it, under its context, and
// Close ends that context and waits for them. Starting and closing take
// the same lock, so that no goroutine starts once Close has begun waiting.
type lifetime struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func newLifetime() *lifetime {
	l := &lifetime{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// start runs fn in a goroutine Close waits for, and reports whether it
// did: once Close has begun it starts nothing.
func (l *lifetime) start(fn func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.wg.Go(func() { fn(l.ctx) })
	return true
}

// close ends the context and waits for every goroutine started.
func (l *lifetime) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
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
	h := &Handler{opts: o, topo: newTopology(&o), pages: p, hist: newHistory(o.CacheFor), life: newLifetime()}
	// Jobs run under the lifetime's context: their requests are the
	// dashboard's own, counted as they are made (see tally).
	h.life.ctx = h.own.attach(h.life.ctx)
	h.jobs = newJobs(h.life, o.Now, o.Logger)
	h.overview = newCache(h.life, o.CacheFor, o.Now, h.readOverview)
	h.poison = newCache(h.life, o.CacheFor, o.Now, h.readPoison)
	h.payloads = newCache(h.life, o.CacheFor, o.Now, h.readPayloads)
	h.schedules = newCache(h.life, o.CacheFor, o.Now, h.readSchedules)
	h.root = h.routes()
	return h, nil
}

// ServeHTTP serves the dashboard's pages, assets and actions.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.root.ServeHTTP(w, r)
}

// Close stops the background jobs the dashboard runs, and any reading
// under way, and waits for them to end. A job stopped so reports how far it
// got; what it had not moved stays where it was. Pages served after Close
// still read (each within its own request), but start no job. Close may be
// called more than once, and concurrently with requests.
func (h *Handler) Close() error {
	h.life.close()
	return nil
}

// Transactions returns the storage requests the dashboard itself has made:
// its readings, its actions and its jobs, counted as they are made (those
// under way included).
func (h *Handler) Transactions() azdispatch.Transactions { return h.own.get() }

// contentSecurityPolicy allows the dashboard's own script, stylesheet and
// images and nothing else: no inline script or style, no frame, no form
// posting elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// maxBody bounds a form's body: the largest is a test message's text.
const maxBody = 128 << 10

// route is what one path serves: a handler per method (GET also answers
// HEAD).
type route map[string]http.HandlerFunc

// routes matches the path itself, exactly: no http.ServeMux, whose cleaning
// and trailing-slash redirects are absolute (they would leave the prefix the
// handler is mounted under, which it cannot see). Whatever it does not know
// is a 404; it never redirects, but for the bare prefix (see bare).
func (h *Handler) routes() http.Handler {
	table := map[string]route{
		"/":          {http.MethodGet: h.serveOverview},
		"/poison":    {http.MethodGet: h.servePoison},
		"/payloads":  {http.MethodGet: h.servePayloads},
		"/schedules": {http.MethodGet: h.serveSchedules},
		"/latency":   {http.MethodGet: h.serveLatency},
		"/listeners": {http.MethodGet: h.serveListeners},
		"/cost":      {http.MethodGet: h.serveCost},
		"/confirm":   {http.MethodGet: h.serveConfirmPage},
		"/jobs":      {http.MethodGet: h.serveJobs},
		"/status":    {http.MethodGet: h.serveStatus},
		"/act":       {http.MethodPost: h.serveAct},
	}
	for name, a := range assets {
		table["/static/"+name] = route{http.MethodGet: serveAsset(a)}
	}
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := table[r.URL.Path]
		if !ok {
			h.fail(w, r, http.StatusNotFound, "No such page.")
			return
		}
		m := r.Method
		if m == http.MethodHead {
			m = http.MethodGet
		}
		fn, ok := rt[m]
		if !ok {
			var allow []string
			for method := range rt {
				allow = append(allow, method)
				if method == http.MethodGet {
					allow = append(allow, http.MethodHead)
				}
			}
			slices.Sort(allow)
			w.Header().Set("Allow", strings.Join(allow, ", "))
			h.fail(w, r, http.StatusMethodNotAllowed, "Method not allowed.")
			return
		}
		fn(w, r)
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
			switch loc, slash := bare(r); {
			case slash:
				// Mounted with http.StripPrefix(prefix+"/") and asked for
				// "prefix/": the root page, whose relative URLs resolve
				// under "prefix/".
			case loc != "":
				// Mounted at "/prefix" and asked for "/prefix": every link
				// is relative to "/prefix/", so go there.
				hd.Set("Location", loc)
				w.WriteHeader(http.StatusMovedPermanently)
				return
			default:
				h.fail(w, r, http.StatusNotFound, "No such page: ask for this address with a slash at its end.")
				return
			}
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
		// Every request the dashboard makes for this one (a reading it
		// starts goes on under its values) is the dashboard's own.
		r = r.WithContext(h.own.attach(r.Context()))
		protected.ServeHTTP(w, r)
	})
}

// bare looks at the path the client asked for when the handler sees an
// empty one (its whole path was the prefix StripPrefix took). slash says
// the client's path ends with a slash: the root page is asked for. Else
// loc is where to redirect: that path with a slash after it, a path
// (never a scheme or a host, so that it stays where the client is), or ""
// when there is none to be had.
func bare(r *http.Request) (loc string, slash bool) {
	p := r.RequestURI
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if !strings.HasPrefix(p, "/") {
		// An absolute-form request ("GET http://host/prefix"): its path.
		u, err := url.ParseRequestURI(r.RequestURI)
		if err != nil || u.Host == "" {
			return "", false
		}
		p = u.EscapedPath()
	}
	switch {
	case strings.HasSuffix(p, "/"):
		return "", p != ""
	case !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\x00"):
		// Not a plain path: a Location made of it could name another host.
		return "", false
	}
	return p + "/", false
}

// asset is one of the embedded static files, read once.
type asset struct {
	body        []byte
	contentType string
}

// assets are the static files by name: the only ones served, so that no
// directory is listed and no other file of the embedded tree is reachable.
var assets = func() map[string]asset {
	out := map[string]asset{}
	entries, _ := fs.ReadDir(files, "static") // cannot fail: the directory is embedded
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := fs.ReadFile(files, "static/"+e.Name())
		if err != nil {
			continue
		}
		ct, ok := assetTypes[path.Ext(e.Name())]
		if !ok {
			ct = "application/octet-stream"
		}
		out[e.Name()] = asset{body: b, contentType: ct}
	}
	return out
}()

// assetTypes are the static files' types, fixed here rather than taken
// from the system's MIME table, which may differ from one host to another.
var assetTypes = map[string]string{
	".css": "text/css; charset=utf-8",
	".js":  "text/javascript; charset=utf-8",
	".svg": "image/svg+xml",
}

// serveAsset writes a static file with the security headers the wrapper
// set (no range requests, no conditional ones: the files are small, and an
// error answered by http.ServeContent would drop Cache-Control).
func serveAsset(a asset) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", a.contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(a.body)
		}
	}
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
