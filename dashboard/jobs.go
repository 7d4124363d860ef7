package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// job is one action that runs in the background (every matching poison
// message requeued or purged, a sweep), with its progress.
type job struct {
	ID       int
	What     string
	Started  time.Time
	Ended    time.Time
	Done     int // messages moved or deleted so far
	Total    int // the most it expects; 0 when not known
	Result   string
	Err      string
	Running  bool
	Stopped  bool // ended by Handler.Close before finishing
	Progress int  // percent, for the progress bar
}

// jobs runs background jobs one at a time, under the handler's context,
// and keeps the latest few for their pages.
type jobs struct {
	life *lifetime
	now  func() time.Time
	log  *slog.Logger

	mu   sync.Mutex
	list []*job
	next int
}

// keptJobs is how many finished jobs are remembered.
const keptJobs = 20

var errBusy = errors.New("another job is running")

var errClosing = errors.New("the dashboard is closing")

func newJobs(life *lifetime, now func() time.Time, log *slog.Logger) *jobs {
	return &jobs{life: life, now: now, log: log}
}

// progress is how a job reports: done so far, and the total when known.
type progress func(done, total int)

// start runs fn in a goroutine the handler owns (Close waits for it); fn
// returns a line saying what it did. Only one job runs at a time: two
// requeues of the same messages at once would only hide them from each
// other.
func (j *jobs) start(what string, total int, fn func(ctx context.Context, p progress) (string, error)) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, x := range j.list {
		if x.Running {
			return x.ID, errBusy
		}
	}
	x := &job{ID: j.next + 1, What: what, Started: j.now(), Total: total, Running: true}
	// Started and counted by the lifetime in one step under its lock, so
	// that Close either waits for it or it never starts.
	ok := j.life.start(func(ctx context.Context) {
		res, err := fn(ctx, func(done, total int) {
			j.mu.Lock()
			x.Done = done
			if total > 0 {
				x.Total = total
			}
			j.mu.Unlock()
		})
		j.mu.Lock()
		defer j.mu.Unlock()
		x.Running, x.Ended, x.Result = false, j.now(), res
		if err != nil {
			x.Err = cleanError(err)
			x.Stopped = ctx.Err() != nil
		}
		j.log.Info("dashboard: job ended", "job", x.What, "done", x.Done, "result", res, "err", err)
	})
	if !ok {
		return 0, errClosing
	}
	// Under j.mu still: the job cannot record its end before it is listed.
	j.next++
	j.list = append(j.list, x)
	if len(j.list) > keptJobs {
		j.list = slices.Delete(j.list, 0, len(j.list)-keptJobs)
	}
	return x.ID, nil
}

// snapshot returns copies of the jobs, newest first.
func (j *jobs) snapshot() []job {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]job, 0, len(j.list))
	for i := len(j.list) - 1; i >= 0; i-- {
		x := *j.list[i]
		switch {
		case !x.Running:
			x.Progress = 100
		case x.Total > 0:
			x.Progress = min(100, x.Done*100/x.Total)
		}
		out = append(out, x)
	}
	return out
}

type jobsBody struct {
	Jobs    []job
	Focus   int // the job the page was opened for
	Running bool
}

func (h *Handler) serveJobs(w http.ResponseWriter, r *http.Request) {
	b := jobsBody{Jobs: h.jobs.snapshot()}
	b.Focus, _ = strconv.Atoi(bounded(r.URL.Query().Get("id"), 10))
	for _, x := range b.Jobs {
		b.Running = b.Running || x.Running
	}
	h.render(w, r, http.StatusOK, "jobs", pageData{
		Title: "Jobs", Nav: "jobs", Write: h.writable(r), Notice: notice(r), Body: b, Refresh: refreshWhile(b.Running),
	})
}

// refreshWhile is a page's refresh period: every 2 s while a job runs, so
// that its progress moves; the default otherwise.
func refreshWhile(running bool) int {
	if running {
		return 2
	}
	return 0
}
