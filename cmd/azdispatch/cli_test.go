package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// Every command on one queue: messages sent, peeked, poisoned by a listener,
// listed, shown, purged and requeued, and an orphaned payload swept.
func TestCommandsOnOneQueue(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	queue, container := uniqueName(t), uniqueName(t)
	target := []string{"-queue", queue, "-payload-container", container}
	keep := "keep: <&> \"ü\"\ttab\r\nand a last line \n"
	const purgeMe = "purge me"

	var sent sendDoc
	runJSON(t, env, exitOK, &sent, append([]string{"send", keep}, target...)...)
	assert.NotEmpty(t, sent.ID)
	assert.False(t, sent.ClaimCheck)
	assert.Equal(t, len(keep), sent.Bytes)
	r := run(t, env, purgeMe, append([]string{"send"}, target...)...) // from stdin
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "sent 8 bytes to "+queue)

	var depth depthDoc
	runJSON(t, env, exitOK, &depth, append([]string{"depth"}, target...)...)
	assert.Equal(t, 2, depth.Total)
	assert.Equal(t, 0, depth.PoisonTotal)
	require.Len(t, depth.Queues, 1)
	assert.Equal(t, "devstoreaccount1", depth.Queues[0].Account, "the account's name, as the depth endpoint gives it")

	var peeked peekDoc
	runJSON(t, env, exitOK, &peeked, append([]string{"peek"}, target...)...)
	require.Len(t, peeked.Messages, 2)
	assert.Equal(t, keep, peeked.Messages[0].Text, "Azurite peeks in order")
	assert.Equal(t, kindPlain, peeked.Messages[0].Kind)
	assert.Zero(t, peeked.Messages[0].DequeueCount)
	r = run(t, env, "", append([]string{"peek", "-n", "1"}, target...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "plain")
	assert.Contains(t, r.stdout, queue+" may hold more than shown")

	account, err := azdispatch.NewAccountFromConnectionString(conn, nil)
	require.NoError(t, err)
	q, err := account.Queue(queue)
	require.NoError(t, err)
	poisonAll(t, q, 2)

	runJSON(t, env, exitOK, &depth, append([]string{"depth"}, target...)...)
	assert.Equal(t, 0, depth.Total)
	assert.Equal(t, 2, depth.PoisonTotal)

	var list poisonListDoc
	runJSON(t, env, exitAttention, &list, append([]string{"poison", "list"}, target...)...)
	require.Len(t, list.Envelopes, 2)
	assert.Equal(t, 2, list.Depth)
	byBody := map[string]poisonEntry{}
	for _, e := range list.Envelopes {
		require.NotNil(t, e.EnvelopeView, "%+v", e)
		byBody[e.Body] = e
		assert.Equal(t, queue+"-poison", e.PoisonQueue)
		assert.Equal(t, queue, e.Queue)
		assert.EqualValues(t, 1, e.DequeueCount)
		assert.Contains(t, e.Reason, "rejected "+e.Body)
		assert.False(t, e.PoisonedAt.Before(e.InsertedAt))
	}
	require.Contains(t, byBody, keep)
	require.Contains(t, byBody, purgeMe)
	r = run(t, env, "", append([]string{"poison", "list"}, target...)...)
	require.Equal(t, exitAttention, r.code, r)
	assert.Contains(t, r.stdout, "rejected")
	assert.Contains(t, r.stdout, "at most the first 32")

	keepID := byBody[keep].MessageID
	r = run(t, env, "", append([]string{"poison", "show", keepID}, target...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "body:\n"+keep+"\n", "the body in full")
	var shown poisonEntry
	runJSON(t, env, exitOK, &shown, append([]string{"poison", "show", byBody[keep].PoisonID}, target...)...)
	assert.Equal(t, keep, shown.Body)
	r = run(t, env, "", append([]string{"poison", "show", "no-such-id"}, target...)...)
	assert.Equal(t, exitFailed, r.code, r)

	r = run(t, env, "", append([]string{"poison", "purge"}, target...)...)
	require.Equal(t, exitUsage, r.code, "no terminal, no -yes: %s", r)
	assert.Contains(t, r.stderr, "-yes")

	var purged purgeDoc
	runJSON(t, env, exitOK, &purged, append([]string{"poison", "purge", "-yes", "-reason", "PURGE"}, target...)...)
	assert.Equal(t, 1, purged.Deleted)
	assert.Equal(t, 1, purged.Skipped)
	runJSON(t, env, exitAttention, &list, append([]string{"poison", "list"}, target...)...)
	require.Len(t, list.Envelopes, 1, "the purged envelope is gone, the other visible again at once")
	assert.Equal(t, keep, list.Envelopes[0].Body)

	var requeued requeueDoc
	runJSON(t, env, exitOK, &requeued, append([]string{"poison", "requeue", "-keep-text", "-id", keepID}, target...)...)
	assert.Equal(t, 1, requeued.Moved)
	d := receiveText(t, q, keep) // byte for byte, with -keep-text
	assert.EqualValues(t, 1, d.DequeueCount)
	runJSON(t, env, exitOK, &list, append([]string{"poison", "list"}, target...)...)
	assert.Empty(t, list.Envelopes)

	// A large text is claim-checked: peek shows the pointer. One that
	// expires at once leaves an orphaned payload for sweep.
	large := strings.Repeat("x", azdispatch.MaxMessageSize+1)
	r = run(t, env, large, append([]string{"send", "-json"}, target...)...) // stdin: a command line cannot hold 64 kB on Windows
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"claim_check": true`)
	runJSON(t, env, exitOK, &peeked, append([]string{"peek"}, target...)...)
	require.Len(t, peeked.Messages, 1)
	assert.Equal(t, kindPointer, peeked.Messages[0].Kind)
	require.NotNil(t, peeked.Messages[0].Pointer)
	assert.Equal(t, 1, peeked.Messages[0].Pointer.Items)
	r = run(t, env, large, append([]string{"send", "-ttl", "1s", "-"}, target...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "claim check")
	sweep(t, env, target)
}

// sweep waits for the one-second payload to expire, then checks that a dry
// run reports it and deletes nothing, and -apply deletes it alone.
func sweep(t *testing.T, env map[string]string, target []string) {
	t.Helper()
	time.Sleep(2100 * time.Millisecond) // the service's times have whole seconds
	args := append([]string{"sweep", "-grace", "1ms"}, target...)
	var res sweepDoc
	for range 2 {
		runJSON(t, env, exitAttention, &res, args...)
		assert.True(t, res.DryRun)
		assert.Equal(t, 1, res.Deleted, "to delete")
		assert.Equal(t, 1, res.Live)
	}
	r := run(t, env, "", args...)
	require.Equal(t, exitAttention, r.code, r)
	assert.Contains(t, r.stdout, "Dry run: nothing deleted")
	runJSON(t, env, exitOK, &res, append(args, "-apply")...)
	assert.False(t, res.DryRun)
	assert.Equal(t, 1, res.Deleted)
	assert.Equal(t, 1, res.Live)
	runJSON(t, env, exitOK, &res, args...)
	assert.Equal(t, 0, res.Deleted)
	assert.Equal(t, 1, res.Live)
}

// Every command on a sharded set over two accounts (two emulators).
func TestCommandsOnAShardedSetOverTwoAccounts(t *testing.T) {
	t.Parallel()
	connA, connB := accounts(t)
	env := map[string]string{"AZ_ACCOUNT_A": connA, "AZ_ACCOUNT_B": connB}
	base, container := uniqueName(t), uniqueName(t)
	const shards = 4
	target := []string{"-base", base, "-shards", "4", "-account-env", "AZ_ACCOUNT_A", "-account-env", "AZ_ACCOUNT_B", "-payload-container", container}
	const keepText, purgeText, keyedText = "keep this one", "purge this one", "keyed this one"
	// Shard i is in account i mod 2: a key for each account.
	key, purgeKey := keyOnShard(shards, 0), keyOnShard(shards, 1)

	var sent sendDoc
	runJSON(t, env, exitOK, &sent, append([]string{"send", keepText}, target...)...)
	runJSON(t, env, exitOK, &sent, append([]string{"send", "-key", purgeKey, purgeText}, target...)...)
	runJSON(t, env, exitOK, &sent, append([]string{"send", "-key", key, keyedText}, target...)...)
	assert.Equal(t, key, sent.Key)

	var depth depthDoc
	runJSON(t, env, exitOK, &depth, append([]string{"depth"}, target...)...)
	require.Len(t, depth.Queues, shards)
	assert.Equal(t, 3, depth.Total)
	perAccount := map[string]int{}
	for i, r := range depth.Queues {
		assert.Equal(t, base+"-"+string(rune('0'+i)), r.Queue)
		perAccount[r.Account] += r.Depth
	}
	assert.Positive(t, perAccount["devstoreaccount1 (AZ_ACCOUNT_A)"])
	assert.Positive(t, perAccount["devstoreaccount1 (AZ_ACCOUNT_B)"])
	assert.Equal(t, 3, perAccount["devstoreaccount1 (AZ_ACCOUNT_A)"]+perAccount["devstoreaccount1 (AZ_ACCOUNT_B)"])
	r := run(t, env, "", append([]string{"depth"}, target...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Regexp(t, `TOTAL\s+3\s+0`, r.stdout)

	// The same, read by the library in each account on its own.
	a, err := azdispatch.NewAccountFromConnectionString(connA, nil)
	require.NoError(t, err)
	b, err := azdispatch.NewAccountFromConnectionString(connB, nil)
	require.NoError(t, err)
	set, err := azdispatch.AccountShards(base, shards, a, b)
	require.NoError(t, err)
	ctx := context.Background()
	for i, sh := range set {
		n, err := sh.Depth(ctx)
		require.NoError(t, err)
		assert.Equal(t, depth.Queues[i].Depth, n, sh.Name())
	}

	var peeked peekDoc
	runJSON(t, env, exitOK, &peeked, append([]string{"peek"}, target...)...)
	require.Len(t, peeked.Messages, 3)
	for _, m := range peeked.Messages {
		if bodyOf(t, m.Text) == keyedText {
			assert.Equal(t, set[azdispatch.KeyShard(key, shards)].Name(), m.Queue, "a keyed message is on its key's shard")
		}
	}

	sq, err := azdispatch.NewShardedQueue(base, set, &azdispatch.ShardedQueueOptions{EmptySkip: 50 * time.Millisecond})
	require.NoError(t, err)
	poisonAll(t, sq, 3)

	var list poisonListDoc
	runJSON(t, env, exitAttention, &list, append([]string{"poison", "list"}, target...)...)
	require.Len(t, list.Envelopes, 3)
	assert.Equal(t, 3, list.Depth)
	ids := map[string]string{}
	for _, e := range list.Envelopes {
		require.NotNil(t, e.EnvelopeView)
		ids[e.Body] = e.MessageID
		assert.True(t, strings.HasSuffix(e.PoisonQueue, "-poison"), e.PoisonQueue)
		assert.Contains(t, e.Reason, "rejected "+e.Body)
	}
	require.Len(t, ids, 3)

	var shown poisonEntry
	runJSON(t, env, exitOK, &shown, append([]string{"poison", "show", ids[keyedText]}, target...)...)
	assert.Equal(t, keyedText, shown.Body)
	assert.Equal(t, set[azdispatch.KeyShard(key, shards)].Name()+"-poison", shown.PoisonQueue, "poisoned beside its shard")

	var purged purgeDoc
	runJSON(t, env, exitOK, &purged, append([]string{"poison", "purge", "-yes", "-id", ids[purgeText]}, target...)...)
	assert.Equal(t, 1, purged.Deleted)

	assert.Equal(t, 2, purged.Skipped)

	// A requeue hides the envelopes its filter rejects for 30 s, so one
	// filtered requeue takes both that are left.
	var requeued requeueDoc
	runJSON(t, env, exitOK, &requeued, append([]string{"poison", "requeue", "-reason", "THIS ONE", "-max", "5"}, target...)...)
	assert.Equal(t, 2, requeued.Moved)
	runJSON(t, env, exitOK, &peeked, append([]string{"peek"}, target...)...)
	require.Len(t, peeked.Messages, 2)
	for _, m := range peeked.Messages {
		if bodyOf(t, m.Text) == keyedText {
			assert.Equal(t, set[azdispatch.KeyShard(key, shards)].Name(), m.Queue, "requeued to its own shard")
		}
	}
	receiveRequeued(t, sq, keepText)
	runJSON(t, env, exitOK, &list, append([]string{"poison", "list"}, target...)...)
	assert.Empty(t, list.Envelopes)
	assert.Zero(t, list.Depth)

	large := strings.Repeat("y", azdispatch.MaxMessageSize+10)
	for _, ttl := range []string{"0s", "1s"} {
		r = run(t, env, large, append([]string{"send", "-json", "-ttl", ttl}, target...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, `"claim_check": true`)
	}
	sweep(t, env, target)
}

// keyOnShard returns a key that KeyShard puts on a shard of the given
// parity, that is (see AccountShards) in account parity of two.
func keyOnShard(shards, parity int) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("customer-%d", i)
		if azdispatch.KeyShard(k, shards)%2 == parity {
			return k
		}
	}
}

// Mistakes on the command line exit 2, help exits 0; neither needs storage.
func TestUsage(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{nil, exitUsage, "Usage: azdispatch"},
		{[]string{"help"}, exitOK, "Exit codes"},
		{[]string{"depth", "-h"}, exitOK, "Exit codes"},
		{[]string{"poison", "purge", "-h"}, exitOK, "-yes"},
		{[]string{"nonsense"}, exitUsage, "unknown command"},
		{[]string{"poison"}, exitUsage, "poison needs a command"},
		{[]string{"depth"}, exitUsage, "-queue"},
		{[]string{"peek", "-queue", "a-queue", "-base", "b"}, exitUsage, "not both"}, // depth and dashboard take both
		{[]string{"depth", "-base", "b"}, exitUsage, "-shards"},
		{[]string{"depth", "-queue", "Not_A_Name"}, exitUsage, "queue name"},
		{[]string{"depth", "-queue", "a-queue", "-account-env", "AZ_UNSET_VARIABLE"}, exitUsage, "AZ_UNSET_VARIABLE is empty"},
		{[]string{"depth", "-queue", "a-queue", "-account-url", "https://a.queue.core.windows.net/?sig=abc"}, exitUsage, "must not carry a query"},
		{[]string{"peek", "-queue", "a-queue", "-n", "33"}, exitUsage, "-n"},
		{[]string{"send", "-queue", "a-queue", "-key", "k", "text"}, exitUsage, "-key needs a sharded set"},
		{[]string{"send", "-queue", "a-queue", "one", "two"}, exitUsage, "one TEXT"},
		{[]string{"poison", "show", "-queue", "a-queue"}, exitUsage, "one ID"},
		{[]string{"poison", "purge", "-queue", "a-queue"}, exitUsage, "-yes"},
		{[]string{"sweep", "-grace", "0s"}, exitUsage, "-grace"},
		{[]string{"depth", "-queue", "a-queue", "-bogus"}, exitUsage, "bogus"},
	} {
		r := run(t, env, "", c.args...)
		assert.Equal(t, c.code, r.code, "%v: %s", c.args, r)
		assert.Contains(t, r.stderr, c.says, "%v", c.args)
	}
	var doc errorDoc
	runJSON(t, env, exitUsage, &doc, "depth", "-queue", "a-queue", "-account-env", "AZ_UNSET_VARIABLE")
	assert.Contains(t, doc.Error, "AZ_UNSET_VARIABLE")
	assert.Equal(t, exitUsage, doc.ExitCode)
}

// A command on a queue that does not exist (a mistyped name, most likely)
// fails, naming it, instead of reporting an empty queue: depth, peek and
// each poison command. A queue that exists but has no poison queue yet is
// simply empty.
func TestCommandsOnAMissingQueueFail(t *testing.T) {
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	typo := []string{"-queue", uniqueName(t)}
	for _, args := range [][]string{
		{"depth"}, {"peek"}, {"poison", "list"}, {"poison", "requeue"}, {"poison", "purge", "-yes"}, {"poison", "show", "some-id"},
	} {
		r := run(t, env, "", append(args, typo...)...)
		assert.Equal(t, exitFailed, r.code, "%v: %s", args, r)
		assert.Contains(t, r.stderr, "no such queue", "%v", args)
		assert.Contains(t, r.stderr, typo[1], "%v names the queue", args)
	}

	queue := uniqueName(t)
	var sent sendDoc
	runJSON(t, env, exitOK, &sent, "send", "x", "-queue", queue)
	var depth depthDoc
	runJSON(t, env, exitOK, &depth, "depth", "-queue", queue)
	assert.Equal(t, 1, depth.Total)
	var list poisonListDoc
	runJSON(t, env, exitOK, &list, "poison", "list", "-queue", queue)
	assert.Empty(t, list.Envelopes, "no poison queue yet: nothing poisoned")
}

// A batch with two items poisoned has two envelopes, both with the batch
// message's ID: poison show by that ID shows one and names the other, so
// that it is not taken for all there is.
func TestPoisonShowNamesTheOtherItemsOfABatch(t *testing.T) {
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	ctx := context.Background()
	q := createdQueue(t, conn)
	pub, err := azdispatch.NewPublisher[int](q, nil)
	require.NoError(t, err)
	sent, err := pub.SendBatch(ctx, []int{0, 1, 2}, nil)
	require.NoError(t, err)
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[int]) error {
		if m.Body != 1 {
			return azdispatch.Permanent(errors.New("not this one"))
		}
		return nil
	}, nil)
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.ItemsPoisoned == 2 && s.Succeeded == 1 })

	var shown poisonEntry
	runJSON(t, env, exitOK, &shown, "poison", "show", sent.ID, "-queue", q.Name())
	assert.Equal(t, sent.ID, shown.MessageID)
	require.Len(t, shown.Others, 1, "the other poisoned item is named")
	assert.NotEqual(t, shown.PoisonID, shown.Others[0])
	r := run(t, env, "", "poison", "show", sent.ID, "-queue", q.Name())
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "other envelopes:")
	assert.Contains(t, r.stdout, shown.Others[0])
}

// A filtered requeue leaves what it skipped visible: a purge run right
// after sees it and deletes it, instead of reporting nothing deleted while
// the envelope sits hidden.
func TestAPurgeRightAfterAFilteredRequeueSeesWhatItSkipped(t *testing.T) {
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	ctx := context.Background()
	q := createdQueue(t, conn)
	for _, text := range []string{"MOVE", "KEEP"} {
		_, err := q.Send(ctx, text, nil)
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[string]) error {
		return azdispatch.Permanent(errors.New("reason " + m.Body))
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Poisoned == 2 })

	var requeued requeueDoc
	runJSON(t, env, exitOK, &requeued, "poison", "requeue", "-reason", "reason MOVE", "-queue", q.Name())
	assert.Equal(t, 1, requeued.Moved)
	var purged purgeDoc
	runJSON(t, env, exitOK, &purged, "poison", "purge", "-yes", "-queue", q.Name())
	assert.Equal(t, 1, purged.Deleted, "the envelope the requeue skipped, visible at once")
}

// createdQueue opens a new queue, created, in the account of conn.
func createdQueue(t *testing.T, conn string) *azdispatch.Queue {
	t.Helper()
	acct, err := azdispatch.NewAccountFromConnectionString(conn, nil)
	require.NoError(t, err)
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	require.NoError(t, q.Create(context.Background()))
	return q
}

// runUntil runs l until its state satisfies done, then stops it and waits
// for Run to return.
func runUntil[T any](t *testing.T, l *azdispatch.Listener[T], done func(azdispatch.State) bool) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() { defer close(ended); _ = l.Run(ctx) }()
	require.Eventually(t, func() bool { return done(l.State()) }, time.Minute, 20*time.Millisecond)
	stop()
	<-ended
}

// Peek shows when a message sent to be handled later is due and how many
// times a listener hid it again, and names a due line a listener would
// refuse.
func TestPeekShowsWhenADelayedMessageIsDue(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	q := createdQueue(t, conn)
	queue := q.Name()
	ctx := context.Background()
	at := time.Date(2027, 5, 1, 8, 0, 0, 0, time.UTC)
	// The texts a listener writes when it hides a message again, and one
	// it would refuse.
	_, err := q.Send(ctx, wire.DueMagic+`{"at":"2027-05-01T08:00:00Z","hops":2,"seen":2}`+"\nrenew", nil)
	require.NoError(t, err)
	_, err = q.Send(ctx, wire.DueMagic+"{}\nbody", nil)
	require.NoError(t, err)

	var peeked peekDoc
	runJSON(t, env, exitOK, &peeked, "peek", "-queue", queue)
	require.Len(t, peeked.Messages, 2)
	m := peeked.Messages[0]
	require.NotNil(t, m.DueAt)
	assert.Equal(t, at, *m.DueAt)
	assert.Equal(t, int64(2), m.Hops)
	assert.Equal(t, kindPlain, m.Kind)
	assert.Equal(t, kindBadDueLine, peeked.Messages[1].Kind)
	r := run(t, env, "", "peek", "-queue", queue)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "2027-05-01T08:00:00Z (2 hops)")
	assert.Contains(t, r.stdout, "malformed due line")
}

// depth -visible tells ready messages from hidden ones (delayed, or being
// handled) by a peek, as far as a peek sees.
func TestDepthTellsVisibleFromHidden(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	q := createdQueue(t, conn)
	queue := q.Name()
	ctx := context.Background()
	for _, delay := range []time.Duration{0, 0, time.Hour} {
		_, err := q.Send(ctx, "m", &azdispatch.SendOptions{Delay: delay})
		require.NoError(t, err)
	}
	var depth depthDoc
	runJSON(t, env, exitOK, &depth, "depth", "-visible", "-queue", queue)
	require.Len(t, depth.Queues, 1)
	r := depth.Queues[0]
	assert.Equal(t, 3, r.Depth)
	require.NotNil(t, r.Visible)
	assert.Equal(t, 2, *r.Visible)
	assert.False(t, r.Full)
	out := run(t, env, "", "depth", "-visible", "-queue", queue)
	require.Equal(t, exitOK, out.code, out)
	assert.Contains(t, out.stdout, "VISIBLE")
	assert.Contains(t, out.stdout, "HIDDEN")

	var plain depthDoc
	runJSON(t, env, exitOK, &plain, "depth", "-queue", queue)
	assert.Nil(t, plain.Queues[0].Visible, "no peek unless asked")
}
