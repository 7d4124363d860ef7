package dashboard

import (
	"context"
	"net/http"

	"github.com/azdispatch/azdispatch"
)

// payloadReading is a dry-run sweep of the payload store: what is there
// and what a sweep would remove, from the listing alone.
type payloadReading struct {
	Res azdispatch.SweepResult
	Err string
}

// readPayloads lists the payload store (one List Blobs request per 5,000
// blobs) and judges each blob as Sweep would, deleting nothing.
func (h *Handler) readPayloads(ctx context.Context) payloadReading {
	if h.topo.store == nil {
		return payloadReading{}
	}
	ctx, cancel := withReadDeadline(ctx)
	defer cancel()
	res, err := azdispatch.Sweep(ctx, h.topo.store, &azdispatch.SweepOptions{DryRun: true})
	return payloadReading{Res: res, Err: readError(ctx, err)}
}

type payloadsBody struct {
	Store    string // the container's name; "" when there is none
	R        payloadReading
	Payloads val   // blobs the package wrote: claim checks, batches and records
	Bytes    int64 // of those: their bytes, as listed
	Singles  int   // of those: claim-checked messages
}

func (h *Handler) servePayloads(w http.ResponseWriter, r *http.Request) {
	rd, at, err := h.payloads.get(r.Context())
	if err != nil {
		return
	}
	b := payloadsBody{R: rd}
	if h.topo.store != nil {
		b.Store = h.topo.store.Container()
		if rd.Err == "" {
			res := rd.Res
			b.Payloads = got(int64(res.Deleted + res.Live + res.Poisoned))
			b.Bytes = res.DeletedBytes + res.LiveBytes + res.PoisonedBytes
			b.Singles = res.Deleted + res.Live + res.Poisoned - res.Batches - res.Records
		} else {
			b.Payloads = val{Err: rd.Err}
		}
	}
	h.render(w, r, http.StatusOK, "payloads", pageData{
		Title: "Payloads", Nav: "payloads", Write: h.writable(r), ReadAgo: fmtDuration(h.since(at)), Notice: notice(r), Body: b,
	})
}
