package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/payload"
)

// sendDoc is the send command's result.
type sendDoc struct {
	Target string `json:"target"`
	ID     string `json:"id"`
	Bytes  int    `json:"bytes"`
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
publisher does. On a sharded set it goes round-robin, or with -key to the key's shard.`)
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
	case key != "" && o.target.queue != "":
		return usageErrorf("-key needs a sharded set (-base and -shards): one queue has no shard to choose")
	case key != "" && delay > 0:
		return usageErrorf("-key and -delay cannot be combined: the library has no delayed keyed send")
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
	t, err := o.target.open(c, needQueue)
	if err != nil {
		return err
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()

	var dest azdispatch.Target = t.queue
	if t.sharded != nil {
		dest = t.sharded
	}
	pub, err := azdispatch.NewPublisher[string](dest, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), TTL: ttl, Payloads: t.store})
	if err != nil {
		return err
	}
	var id string
	var due time.Time
	switch {
	case key != "":
		id, err = pub.SendKeyed(ctx, key, text)
	case delay > 0:
		var s azdispatch.Sent
		s, err = pub.SendAfter(ctx, text, delay)
		id, due = s.ID, s.Due
	default:
		id, err = pub.Send(ctx, text)
	}
	if err != nil {
		if errors.Is(err, azdispatch.ErrInvalidText) {
			return usageError{err}
		}
		return err
	}
	doc := sendDoc{
		Target: t.name(), ID: id, Bytes: len(text), Key: key,
		ClaimCheck: len(text) > azdispatch.MaxMessageSize || payload.IsPointer(text),
	}
	if delay > 0 {
		doc.Delay, doc.Due = delay.String(), due.Format(time.RFC3339)
	}
	return c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		how := "as a message"
		if doc.ClaimCheck {
			how = "as a payload blob and a pointer (claim check)"
		}
		fmt.Fprintf(tw, "sent %d bytes to %s %s: message %s\n", doc.Bytes, doc.Target, how, doc.ID)
		if doc.Due != "" {
			fmt.Fprintf(tw, "due %s by the service's clock\n", doc.Due)
		}
	})
}
