package azdispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/azdispatch/azdispatch/internal/codec"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/wire"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// poisonHeaderReserve is the room, in bytes, kept for the header a poison
// envelope puts before the original text. Publishers stay this far under the
// service limit (see [MaxMessageSize]) so their messages can always be poisoned.
const poisonHeaderReserve = 1024

const (
	poisonSuffix = "-poison"
	// requeueVisibility hides the poison messages [Requeue] leaves behind, so
	// that its run mostly meets new ones.
	requeueVisibility = 30 * time.Second
)

// PoisonEnvelope is what a poison queue holds for each message a listener
// gave up on: the original text, unchanged, and why. On the queue it is a
// line (a marker of the format and its version, then this header as JSON)
// followed by the original text.
type PoisonEnvelope struct {
	Queue        string    `json:"queue"` // the source the message came from
	MessageID    string    `json:"id"`
	DequeueCount int64     `json:"dequeue_count"`
	Reason       string    `json:"reason"`
	InsertedAt   time.Time `json:"inserted_at"`
	PoisonedAt   time.Time `json:"poisoned_at"`
	// ExpiresAt is when the original message would have expired (the last
	// day of 9999 for one sent never to expire): [Requeue] sends it back
	// with the lifetime it was sent with. Zero in envelopes written before
	// it was recorded.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Earlier names the messages this one was requeued from, oldest
	// first, at most [MaxEarlierIDs]: a message poisoned, moved back by
	// [Requeue] and poisoned again names the ID it had before, so that an
	// operator can follow it. [Requeue] carries them in the requeued
	// message's [Metadata] under [MetadataRequeuedFrom]. Nil for a message
	// never requeued, and in envelopes written before it was recorded.
	Earlier []string `json:"earlier,omitempty"`
	// Batch and Item name the batch item poisoned on its own, whose text
	// is Body; Batch is empty for a whole message.
	Batch string `json:"batch,omitempty"`
	Item  int    `json:"item,omitempty"`
	// Body is the original message text (for a batch item, the item's
	// encoded text), without a delay's due line or a group continuation's
	// once-mark, so that its requeued copy is neither delayed again nor
	// dropped as a duplicate of itself. A body too large for a poison queue message is stored
	// as a payload blob and Body holds a pointer to it, which [Requeue] puts
	// back like any text and a listener resolves.
	Body string `json:"-"`
}

// newPoisonEnvelope describes d, poisoned from source for reason, with
// the earlier IDs its metadata names if [Requeue] moved it back before.
func newPoisonEnvelope(source string, d *Delivery, reason string, now time.Time) *PoisonEnvelope {
	body := poisonBody(d.Text)
	return &PoisonEnvelope{
		Queue: source, MessageID: d.ID, DequeueCount: d.DequeueCount, Reason: reason,
		InsertedAt: d.InsertedAt, PoisonedAt: now.UTC(), ExpiresAt: d.ExpiresAt, Body: body,
		Earlier: earlierIn(body),
	}
}

// poisonBody is what a poison envelope keeps of a message's text: the
// text without its due line (see bodyText) and without a group
// continuation's once-mark. Its requeued copy, a message of another ID,
// would otherwise find the mark its first delivery wrote and be dropped as
// a duplicate, and its group's outcome with it; as a scheduled occurrence,
// requeued without its due line, it is handled as a message of its own.
func poisonBody(text string) string {
	body := bodyText(text)
	if !wire.Marked(body) {
		return body
	}
	msg, err := wire.Parse(body, wire.Limits{})
	if err != nil && !errors.Is(err, wire.ErrInvalidPointer) {
		return body // kept as it was: the listener poisons it again for what it is
	}
	pairs := msg.Meta.Pairs()
	if _, ok := pairs[wire.OnceEntry]; !ok {
		return body
	}
	pairs = maps.Clone(pairs)
	delete(pairs, wire.OnceEntry)
	if msg.Meta, err = wire.NewMeta(pairs); err != nil {
		return body
	}
	return msg.Render()
}

// encode returns the envelope as message text. To keep the header within
// poisonHeaderReserve it drops the earlier IDs but the latest, then
// shortens the reason, then drops the last earlier ID.
func (e *PoisonEnvelope) encode() (string, error) {
	h := *e
	for {
		// Not json.Marshal: it escapes <, > and & as \u003c…, which an
		// operator reading the envelope with az or Storage Explorer would
		// see as such.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&h); err != nil {
			return "", err
		}
		// A reason may quote a body or an error holding U+FFFE or
		// U+FFFF, which XML cannot carry: escaped, or every move to the
		// poison queue would be refused, and the message poisoned in the
		// end for its dequeue count, its reason lost.
		header := codec.EscapeNoncharacters(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		if wire.EnvelopeHeadLen(len(header)) <= poisonHeaderReserve {
			return wire.RenderEnvelope(string(header), e.Body), nil
		}
		switch {
		case len(h.Earlier) > 1:
			h.Earlier = h.Earlier[len(h.Earlier)-1:]
		case h.Reason != "":
			h.Reason = xmltext.TruncateUTF8(h.Reason, len(h.Reason)/2)
		case len(h.Earlier) > 0:
			h.Earlier = nil
		default:
			return "", fmt.Errorf("azdispatch: poison header of %d bytes does not fit", len(header))
		}
	}
}

// envelopeText encodes env. An envelope that a queue message cannot carry
// (a body near or over 64 KiB, or a batch item's text that XML cannot carry)
// has its body offloaded to store, as a blob marked poisoned so that [Sweep]
// keeps it; the envelope then holds a pointer in its place.
func envelopeText(ctx context.Context, env *PoisonEnvelope, store *PayloadStore, lim payload.Limits) (string, error) {
	text, err := env.encode()
	if err != nil {
		return "", err
	}
	tooLarge := checkText(text, serviceMessageLimit)
	if tooLarge == nil || store == nil {
		return text, tooLarge
	}
	// A metadata line stays on the envelope, before the pointer, as a
	// publisher's claim check puts it: a listener reads metadata from the
	// queue text, never from a blob.
	meta, body, err := wire.CutMeta(env.Body)
	if err != nil || meta.Pairs() == nil {
		meta, body = wire.Meta{}, env.Body
	}
	w := payload.NewWriter(lim)
	if err := w.Add(body); err != nil {
		return "", err
	}
	data, err := w.Finish()
	if err != nil {
		return "", err
	}
	now := time.Now()
	p, err := store.put(ctx, payload.Meta{Kind: payload.KindSingle, Queue: env.Queue, Created: now, Items: 1, Poisoned: now}, data)
	if err != nil {
		return "", err
	}
	small := *env
	offloaded := wire.Text{Meta: meta, Pointer: p}
	small.Body = offloaded.Render()
	return small.encode()
}

// ParsePoison reads an envelope written by a listener. Text that is not one
// gives an error matching [ErrNotPoison].
func ParsePoison(text string) (*PoisonEnvelope, error) {
	header, body, err := wire.CutEnvelope(text) // its errors match ErrNotPoison
	if err != nil {
		return nil, err
	}
	var e PoisonEnvelope
	if err := json.Unmarshal([]byte(header), &e); err != nil {
		return nil, fmt.Errorf("%w: header: %s", ErrNotPoison, headerError(err))
	}
	e.Body = body
	return &e, nil
}

// headerError tells why a header did not decode. A time that does not
// parse is told with its first bytes only: time's own message quotes the
// whole value, byte by byte where it is not UTF-8, and more than once, and
// a hostile header of a few KiB then cost hundreds of KiB to report.
func headerError(err error) string {
	var pe *time.ParseError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	v := pe.Value
	if len(v) > 64 {
		v = v[:64]
	}
	return "a time that does not parse: " + strconv.Quote(v)
}

// RequeueOptions narrows a [Requeue]. Nil means every envelope.
type RequeueOptions struct {
	// Max is the most messages to move; 0 means all.
	Max int
	// Filter picks the envelopes to move; nil means all. Those it rejects
	// stay in the poison queue.
	Filter func(*PoisonEnvelope) bool
	// KeepText sends each message back byte for byte as it was poisoned,
	// without the [MetadataRequeuedFrom] entry that names its earlier IDs.
	// Defaults to false: a message in this package's own format gets that
	// entry, so that, poisoned again, its envelope names the IDs it had. A
	// codec's text alone goes back byte for byte either way (see [Requeue]).
	KeepText bool
}

// RequeueResult counts what a [Requeue] did.
type RequeueResult struct {
	Moved      int // sent back with their original text, and deleted from the poison queue
	Skipped    int // rejected by the filter; left in the poison queue
	Invalid    int // not poison envelopes; left in the poison queue
	Duplicates int // envelopes of a message already moved by this run: deleted, not sent again
}

// Requeue moves messages from a poison queue back to a target, restoring each
// original text. A text that only this package's listeners read (one with
// [Metadata], a claim check or batch pointer, or a delay's due line) gets
// one metadata entry more, [MetadataRequeuedFrom]: the IDs the message had,
// so that its envelope names them if it is poisoned again
// ([RequeueOptions.KeepText] leaves it out). A codec's text alone goes back
// byte for byte, since other consumers may read it (the Azure Functions
// queue trigger): send metadata (a [SendMiddleware] that sets an entry,
// or otelazdispatch's trace context) for requeued messages to name their
// earlier IDs. The moved message starts
// again with a dequeue count of 0,
// and lives as long as the original was sent to live (a message sent never
// to expire never expires; an envelope that does not say, written by an
// older version, is requeued never to expire).
// Each message is sent before it is deleted from the poison queue, so a
// failure between the two leaves a copy in both places rather than in none.
// Messages left behind (rejected by the filter, not envelopes, or not
// reached when it stopped) are hidden while it runs, so that each batch
// brings new ones, and made visible again when it returns (one request
// each, in parallel): a purge or a look right after sees them. Requeue remembers the IDs it has seen and stops
// at the first batch that holds nothing new.
//
// A message can be poisoned twice: when the delete after its copy to the
// poison queue fails, and its next delivery reaches another listener.
// Envelopes are keyed by the original message's ID (and batch item), so a
// second envelope of a message this run has moved is deleted, not sent
// again ([RequeueResult.Duplicates]). Run Requeue over the whole poison queue
// (no [RequeueOptions.Max]) for this to catch them all.
func Requeue(ctx context.Context, poison Source, to Target, opts *RequeueOptions) (_ RequeueResult, err error) {
	r := &requeueRun{
		poison: poison, to: to,
		left:  map[string]*Delivery{},
		seen:  map[string]bool{},
		moved: map[envelopeKey]bool{},
	}
	if opts != nil {
		r.o = *opts
	}
	defer func() { err = errors.Join(err, releaseLeft(ctx, poison, r.left)) }()
	for r.o.Max == 0 || r.res.Moved < r.o.Max {
		want := MaxBatch
		if r.o.Max > 0 {
			want = min(want, r.o.Max-r.res.Moved)
		}
		batch, err := poison.Receive(ctx, want, requeueVisibility)
		if err != nil {
			if isQueueNotFound(err) {
				return r.res, nil // no poison queue: nothing was ever poisoned there
			}
			return r.res, err
		}
		fresh, err := r.settle(ctx, batch)
		if err != nil || fresh == 0 {
			return r.res, err
		}
	}
	return r.res, nil
}

// requeueRun is one [Requeue]: what it has done, and what it has seen.
type requeueRun struct {
	poison Source
	to     Target
	o      RequeueOptions
	res    RequeueResult
	// left holds, by ID, the latest delivery of each message this run
	// received and did not settle (skipped, not an envelope, or not yet
	// looked at when the run ended): made visible again at once when it
	// returns, so that a purge or a look right after sees them.
	left  map[string]*Delivery
	seen  map[string]bool
	moved map[envelopeKey]bool
}

// settle moves, deletes or leaves each message of batch; fresh counts
// those this run had not seen before.
func (r *requeueRun) settle(ctx context.Context, batch []*Delivery) (fresh int, err error) {
	for _, d := range batch {
		r.left[d.ID] = d // until settled below; a later delivery's receipt replaces an earlier one's
	}
	for _, d := range batch {
		if r.seen[d.ID] {
			continue // left behind earlier in this run, and back already
		}
		r.seen[d.ID] = true
		fresh++
		env, err := ParsePoison(d.Text)
		switch {
		case err != nil:
			r.res.Invalid++
		case env.MessageID != "" && r.moved[env.key()]:
			if err := r.poison.Delete(ctx, d); err != nil {
				return fresh, wrapf(err, "requeue: deleting duplicate envelope %s", d.ID)
			}
			delete(r.left, d.ID)
			r.res.Duplicates++
		case r.o.Filter != nil && !r.o.Filter(env):
			r.res.Skipped++
		default:
			if err := requeueOne(ctx, r.poison, r.to, d, env, !r.o.KeepText); err != nil {
				return fresh, err
			}
			delete(r.left, d.ID)
			r.moved[env.key()] = true
			r.res.Moved++
		}
	}
	return fresh, nil
}

// releaseLeft makes the messages a Requeue left behind visible again, in
// parallel, within 10 s even if ctx has ended. One found gone, or held by
// another receiver since (its receipt stale), needs nothing; another
// failure is reported, and its message reappears after
// requeueVisibility as it would have anyway.
func releaseLeft(ctx context.Context, poison Source, left map[string]*Delivery) error {
	if len(left) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, d := range left {
		wg.Go(func() {
			err := poison.SetVisibility(ctx, d, 0)
			if err == nil || errors.Is(err, ErrOwnershipLost) {
				return
			}
			mu.Lock()
			errs = append(errs, wrapf(err, "requeue: making %s visible again", d.ID))
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// envelopeKey names the message an envelope holds: the original message's
// ID, and for a batch item its batch and index.
type envelopeKey struct {
	id, batch string
	item      int
}

func (e *PoisonEnvelope) key() envelopeKey {
	return envelopeKey{id: e.MessageID, batch: e.Batch, item: e.Item}
}

func requeueOne(ctx context.Context, poison Source, to Target, d *Delivery, env *PoisonEnvelope, chain bool) error {
	text := env.Body
	if chain && env.MessageID != "" {
		text = withEarlier(text, append(slices.Clone(env.Earlier), env.MessageID))
	}
	if _, err := to.Send(ctx, text, &SendOptions{TTL: env.lifetime()}); err != nil {
		return wrapf(err, "requeue %s", d.ID)
	}
	if err := poison.Delete(ctx, d); err != nil {
		return wrapf(err, "requeue %s: sent, but not deleted from the poison queue (it may be requeued twice)", d.ID)
	}
	return nil
}

// neverExpires is the expiry the service reports for a message sent never
// to expire.
var neverExpires = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// lifetime is the TTL the original message was sent with, as [SendOptions]
// takes it: -1 for one that never expires, or when the envelope does not
// say.
func (e *PoisonEnvelope) lifetime() time.Duration {
	ttl := e.ExpiresAt.Sub(e.InsertedAt)
	if e.ExpiresAt.IsZero() || e.InsertedAt.IsZero() || !e.ExpiresAt.Before(neverExpires) || ttl <= 0 {
		return -1
	}
	return ttl
}

// MetadataRequeuedFrom is the [Metadata] key under which [Requeue] writes
// the IDs a message had before it was poisoned, oldest first, separated
// by spaces: the listener that poisons it again copies them into its
// envelope's [PoisonEnvelope.Earlier]. Listeners leave it out of the
// metadata a handler's middleware sees ([Call].Metadata): it tells the
// message's past, not what its sender said, and a handler that forwards
// its metadata to a new message must not pass it on.
const MetadataRequeuedFrom = wire.RequeuedFromEntry

// MaxEarlierIDs bounds the earlier IDs a message carries, and its
// envelope names: the latest ones are kept. A message requeued more often
// than this has been poisoned for the same cause more than enough to be
// followed.
const MaxEarlierIDs = 8

// maxEarlierID bounds one earlier ID a listener takes from a message's
// metadata: a service message ID is a 36-character GUID; a longer one is
// not one, and is left out rather than let a hostile text fill the
// envelope's header.
const maxEarlierID = 64

// earlierIn returns the earlier IDs text's metadata names (see
// [MetadataRequeuedFrom]): the latest [MaxEarlierIDs] of those that look
// like IDs, or nil. A text without metadata, or with malformed metadata,
// names none.
func earlierIn(text string) []string {
	msg, err := wire.Parse(text, wire.Limits{})
	if err != nil && !errors.Is(err, wire.ErrInvalidPointer) || msg.Meta.Pairs() == nil {
		return nil
	}
	return cleanEarlier(strings.Fields(msg.Meta.Pairs()[MetadataRequeuedFrom]))
}

// senderMetadata is m without [MetadataRequeuedFrom]: what a handler's
// middleware sees. It copies m only when it holds the key.
func senderMetadata(m Metadata) Metadata {
	if _, ok := m[MetadataRequeuedFrom]; !ok {
		return m
	}
	out := make(Metadata, len(m)-1)
	for k, v := range m {
		if k != MetadataRequeuedFrom {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// cleanEarlier keeps the IDs that fit an envelope (printable, without
// spaces, at most maxEarlierID bytes), the latest MaxEarlierIDs of them.
func cleanEarlier(ids []string) []string {
	var out []string
	for _, id := range ids {
		if id == "" || len(id) > maxEarlierID || xmltext.Check(id) != nil || strings.ContainsFunc(id, unicode.IsSpace) {
			continue
		}
		out = append(out, id)
	}
	if len(out) > MaxEarlierIDs {
		out = out[len(out)-MaxEarlierIDs:]
	}
	return out
}

// withEarlier returns text with its metadata naming ids as the IDs it had
// before (see [MetadataRequeuedFrom]), replacing any it named. It returns
// text unchanged when that cannot be done without harm: it is a codec's text
// alone (see [wire.Marked]), its metadata or its due line is
// malformed (the listener poisons it again for that, and the envelope
// keeps its text as it was), or the line would push a text that fits
// [MaxMessageSize] past it (a text that large must keep its room for the
// header of the envelope that may poison it again).
func withEarlier(text string, ids []string) string {
	ids = cleanEarlier(ids)
	if len(ids) == 0 {
		return text
	}
	if !wire.Marked(text) {
		// A codec's text alone may be read by consumers that know no
		// metadata line (the Azure Functions queue trigger, listeners from
		// before metadata): it goes back byte for byte, as it was sent.
		return text
	}
	// A pointer is kept as it is, valid or not: the metadata goes before it.
	msg, err := wire.Parse(text, wire.Limits{})
	if err != nil && !errors.Is(err, wire.ErrInvalidPointer) {
		return text
	}
	m := make(Metadata, len(msg.Meta.Pairs())+1)
	for k, v := range msg.Meta.Pairs() {
		m[k] = v
	}
	m[MetadataRequeuedFrom] = strings.Join(ids, " ")
	if msg.Meta, err = wire.NewMeta(m); err != nil {
		return text
	}
	out := msg.Render()
	if len(out) > MaxMessageSize && len(text) <= MaxMessageSize {
		return text
	}
	return out
}
