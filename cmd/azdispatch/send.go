package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
)

// sendDoc is the send command's result.
type sendDoc struct {
	Target string `json:"target"`
	// Queue and Account are the queue that took the message and its
	// account: for a sharded set, the shard the library chose (by key, or
	// round robin, passing over a shard that fails), so that the message
	// can be found, peeked or traced.
	Queue   string `json:"queue"`
	Account string `json:"account"`
	// Shard is the shard's index in the set; absent for a single queue.
	Shard *int `json:"shard,omitempty"`
	// Created is how many shards of a new set this send created (all of
	// them: see createNewSet); absent otherwise.
	Created int    `json:"created_shards,omitempty"`
	ID      string `json:"id"`
	Bytes   int    `json:"bytes"`
	// ClaimCheck says the text went to a payload blob and a pointer to it
	// was sent, as the library does for a text too large for a message.
	ClaimCheck bool   `json:"claim_check"`
	Key        string `json:"key,omitempty"`
	Delay      string `json:"delay,omitempty"`
	Due        string `json:"due,omitempty"` // when a delayed message is due, on the service's clock
}

func runSend(ctx context.Context, c *cli, args []string) error {
	var o common
	var key string
	var delay, ttl time.Duration
	fs := c.flagSet("send", "send (-queue NAME | -base NAME -shards N) [-key K] [-delay D] [-ttl D] [TEXT | -]",
		`Sends TEXT, or the whole of stdin (no TEXT, or "-"), byte for byte, through the library's
Publisher with the Raw codec: a text over the largest message size (or one that would pass
for a pointer) is written to a payload blob and a pointer is sent in its place, as every
publisher does. On a sharded set it goes round-robin, or with -key to the key's shard; the
output names the queue that took it, its account and its shard. A new set (none of its
shards exists) is created whole, all N shards, so that it reads back at its size.`)
	o.register(fs)
	fs.StringVar(&key, "key", "", "send to the shard of this key (sharded sets only)")
	fs.DurationVar(&delay, "delay", 0, "keep the message from listeners for this long (any length; beyond 7 days listeners hide it again until it is due)")
	fs.DurationVar(&ttl, "ttl", 0, "how long the message lives (default the service's 7 days; negative: never expires)")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usageErrorf("send takes one TEXT (quote it), got %d arguments", len(pos))
	}
	switch {
	case key != "" && len(o.target.queues()) > 0:
		return usageErrorf("-key needs a sharded set (-base and -shards): one queue has no shard to choose")
	case delay < 0:
		return usageErrorf("-delay must not be negative")
	}
	var text string
	if len(pos) == 1 && pos[0] != "-" {
		text = pos[0]
	} else {
		b, err := io.ReadAll(c.stdin)
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		text = string(b)
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, err := o.target.open(ctx, c, needQueue)
	if err != nil {
		return err
	}

	var dest azdispatch.Target = t.queue
	created := 0
	if t.sharded != nil {
		dest = t.sharded
		if created, err = createNewSet(ctx, t); err != nil {
			return err
		}
	}
	// The shard that took the message is known only inside the send: a
	// send middleware reads it there.
	var sentTo string
	tell := azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
		err := s.Next(ctx)
		sentTo = s.SentTo
		return err
	})
	pub, err := azdispatch.NewPublisher[string](dest, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), TTL: ttl, Payloads: t.store,
		Middleware: []azdispatch.SendMiddleware{tell}})
	if err != nil {
		return err
	}
	sent, err := pub.SendWith(ctx, text, &azdispatch.SendOptions{Key: key, Delay: delay})
	if err != nil {
		if errors.Is(err, azdispatch.ErrInvalidText) {
			return usageError{err}
		}
		return err
	}
	doc := sendDoc{
		Target: t.name(), ID: sent.ID, Bytes: len(text), Key: key, Created: created,
		ClaimCheck: len(text) > azdispatch.MaxMessageSize || azdispatch.DescribeText(text).Reserved,
	}
	doc.Queue, doc.Account, doc.Shard = t.locate(sentTo)
	if delay > 0 {
		doc.Delay, doc.Due = delay.String(), sent.Due.Format(time.RFC3339)
	}
	return c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		how := "as a message"
		if doc.ClaimCheck {
			how = "as a payload blob and a pointer (claim check)"
		}
		if doc.Created > 0 {
			fmt.Fprintf(tw, "created the set %s: %d shards, %s-0 … %s-%d\n", doc.Target, doc.Created, doc.Target, doc.Target, doc.Created-1)
		}
		where := fmt.Sprintf("%s (in %s)", doc.Queue, doc.Account)
		switch {
		case doc.Queue == "":
			where = doc.Target
		case doc.Shard != nil:
			where = fmt.Sprintf("%s, shard %d of %s (in %s)", doc.Queue, *doc.Shard, doc.Target, doc.Account)
		}
		fmt.Fprintf(tw, "sent %d bytes to %s %s: message %s\n", doc.Bytes, where, how, doc.ID)
		if doc.Due != "" {
			fmt.Fprintf(tw, "due %s by the service's clock\n", doc.Due)
		}
	})
}

// createNewSet creates every shard of a set none of whose queues exist yet,
// and returns how many it created. The library creates a shard on its
// first message only, which would leave a new set's last shards missing
// until each got one; the next command would then read the set as smaller
// than its -shards (see shardCensus). Created whole, the set reads back at
// its size. Nothing is created when the census is unknown (the queues
// could not be listed): the send then creates the one shard it uses.
func createNewSet(ctx context.Context, t *target) (int, error) {
	if t.shards == nil || t.shards.found() > 0 {
		return 0, nil
	}
	if err := t.sharded.Create(ctx); err != nil {
		return 0, fmt.Errorf("creating the new set %s: %w", t.name(), err)
	}
	return len(t.sharded.Shards()), nil
}
