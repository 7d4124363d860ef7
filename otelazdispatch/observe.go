package otelazdispatch

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/azdispatch/azdispatch"
)

// observers are the asynchronous instruments, read by callbacks that
// ObserveAccounts and ObserveListener register.
type observers struct {
	transactions metric.Int64ObservableCounter
	empty        metric.Int64ObservableCounter
	dequeuers    metric.Int64ObservableUpDownCounter
	inFlight     metric.Int64ObservableUpDownCounter
	poisoned     metric.Int64ObservableCounter
	payload      metric.Int64ObservableUpDownCounter
	retries      metric.Int64ObservableCounter
	rehidden     metric.Int64ObservableCounter
	wanted       metric.Int64ObservableGauge
	waitedP99    metric.Float64ObservableGauge
	oldestAge    metric.Float64ObservableGauge
	ageFailures  metric.Int64ObservableCounter
	// ObserveGroup's.
	groupChildren metric.Int64ObservableGauge
	groupFailures metric.Int64ObservableCounter
}

func (o *observers) init(m metric.Meter) error {
	var errs [14]error
	o.transactions, errs[0] = m.Int64ObservableCounter("azdispatch.storage.transactions", metric.WithUnit("{request}"),
		metric.WithDescription("Billable storage requests, retries included, by kind, account and queue."))
	o.empty, errs[1] = m.Int64ObservableCounter("azdispatch.storage.empty_receives", metric.WithUnit("{request}"),
		metric.WithDescription("Receive requests that found no message: the cost of polling an idle queue."))
	o.dequeuers, errs[2] = m.Int64ObservableUpDownCounter("azdispatch.listener.dequeuers", metric.WithUnit("{dequeuer}"),
		metric.WithDescription("Receive loops running, by state: busy, or idle (backing off after an empty receive)."))
	o.inFlight, errs[3] = m.Int64ObservableUpDownCounter("azdispatch.listener.in_flight", metric.WithUnit("{message}"),
		metric.WithDescription("Messages being handled or settled."))
	o.poisoned, errs[4] = m.Int64ObservableCounter("azdispatch.listener.poisoned", metric.WithUnit("{message}"),
		metric.WithDescription("Messages moved to the poison queue."))
	o.payload, errs[5] = m.Int64ObservableUpDownCounter("azdispatch.listener.payload_memory", metric.WithUnit("By"),
		metric.WithDescription("Bytes of offloaded payloads held in memory."))
	o.retries, errs[6] = m.Int64ObservableCounter("azdispatch.listener.retries", metric.WithUnit("{message}"),
		metric.WithDescription("Messages released to be tried again later, by reason."))
	o.rehidden, errs[7] = m.Int64ObservableCounter("azdispatch.listener.rehidden", metric.WithUnit("{message}"),
		metric.WithDescription("Delayed messages received before they were due and hidden again."))
	o.wanted, errs[8] = m.Int64ObservableGauge("azdispatch.listener.wanted_dequeuers", metric.WithUnit("{dequeuer}"),
		metric.WithDescription("Dequeuers the last scaling decision asked for, before the listener's maximum capped it."))
	o.waitedP99, errs[9] = m.Float64ObservableGauge("azdispatch.listener.time_in_queue.p99", metric.WithUnit("s"),
		metric.WithDescription("99th percentile of the recent first deliveries' time in queue, on the service's clock."))
	o.oldestAge, errs[10] = m.Float64ObservableGauge("azdispatch.queue.oldest_age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest of the messages at the front of the queue, on the service's clock: an approximation of the oldest of all."))
	o.ageFailures, errs[11] = m.Int64ObservableCounter("azdispatch.queue.oldest_age_failures", metric.WithUnit("{reading}"),
		metric.WithDescription("Readings of azdispatch.queue.oldest_age that failed and observed nothing."))
	o.groupChildren, errs[12] = m.Int64ObservableGauge("azdispatch.group.children", metric.WithUnit("{message}"),
		metric.WithDescription("A group's children by state: succeeded, failed (poisoned) or pending."))
	o.groupFailures, errs[13] = m.Int64ObservableCounter("azdispatch.group.read_failures", metric.WithUnit("{reading}"),
		metric.WithDescription("Readings of azdispatch.group.children that failed and observed nothing."))
	return errors.Join(errs[:]...)
}

// ObserveAccounts reports the billable storage requests made through
// accounts as azdispatch.storage.transactions, read at each collection:
// queue requests by queue (every queue opened through the account), blob
// requests by account; and the receives that found nothing as
// azdispatch.storage.empty_receives. Unregister the result to stop.
func (i *Instrumentation) ObserveAccounts(accounts ...*azdispatch.Account) (metric.Registration, error) {
	o := &i.observers
	reg, err := i.meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		for _, a := range accounts {
			account := AccountKey.String(a.Name())
			for _, q := range a.Queues() {
				t := q.Transactions()
				queue := semconv.MessagingDestinationName(q.Name())
				for _, k := range queueKinds(t) {
					if k.n > 0 {
						obs.ObserveInt64(o.transactions, k.n, metric.WithAttributes(account, queue, TransactionKindKey.String(k.name)))
					}
				}
				if t.EmptyReceive > 0 {
					obs.ObserveInt64(o.empty, t.EmptyReceive, metric.WithAttributes(account, queue))
				}
			}
			for _, k := range blobKinds(a.Transactions()) {
				if k.n > 0 {
					obs.ObserveInt64(o.transactions, k.n, metric.WithAttributes(account, TransactionKindKey.String(k.name)))
				}
			}
		}
		return nil
	}, o.transactions, o.empty)
	if err != nil {
		return nil, fmt.Errorf("otelazdispatch: %w", err)
	}
	return reg, nil
}

// StateReader is what [Instrumentation.ObserveListener] reads: any
// [azdispatch.Listener].
type StateReader interface {
	State() azdispatch.State
}

// ObserveListener reports a listener's state, read at each collection, with
// messaging.destination.name set to queue: its dequeuers (busy and idle),
// messages in flight, messages poisoned, payload memory held, retries by
// reason ([azdispatch.State.RetriedFor]), delayed messages hidden again
// ([azdispatch.State.Rehidden]), the dequeuers its scaling wanted
// ([azdispatch.State.Wanted], 0 before its first decision) and the 99th
// percentile of its recent first deliveries' time in queue
// ([azdispatch.State.TimeInQueue], observed only while some are recent). See
// the package documentation's Metrics. Unregister the result to stop.
func (i *Instrumentation) ObserveListener(queue string, l StateReader) (metric.Registration, error) {
	o := &i.observers
	dest := semconv.MessagingDestinationName(queue)
	system := semconv.MessagingSystemKey.String(System)
	busy := metric.WithAttributes(system, dest, DequeuerStateKey.String("busy"))
	idle := metric.WithAttributes(system, dest, DequeuerStateKey.String("idle"))
	plain := metric.WithAttributes(system, dest)
	var because [len(retryReasons)]metric.ObserveOption
	for k, r := range retryReasons {
		because[k] = metric.WithAttributes(system, dest, RetryReasonKey.String(r))
	}
	reg, err := i.meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		s := l.State()
		obs.ObserveInt64(o.dequeuers, int64(s.ActiveDequeuers-s.IdleDequeuers), busy)
		obs.ObserveInt64(o.dequeuers, int64(s.IdleDequeuers), idle)
		obs.ObserveInt64(o.inFlight, int64(s.InFlight), plain)
		obs.ObserveInt64(o.poisoned, s.Poisoned, plain)
		obs.ObserveInt64(o.payload, s.PayloadBytes, plain)
		for k, n := range retryCounts(s.RetriedFor) {
			obs.ObserveInt64(o.retries, n, because[k])
		}
		obs.ObserveInt64(o.rehidden, s.Rehidden, plain)
		obs.ObserveInt64(o.wanted, int64(s.Wanted), plain)
		if s.TimeInQueue.Recent > 0 {
			obs.ObserveFloat64(o.waitedP99, s.TimeInQueue.P99.Seconds(), plain)
		}
		return nil
	}, o.dequeuers, o.inFlight, o.poisoned, o.payload, o.retries, o.rehidden, o.wanted, o.waitedP99)
	if err != nil {
		return nil, fmt.Errorf("otelazdispatch: %w", err)
	}
	return reg, nil
}

// retryReasons are the values of [RetryReasonKey], in the order of
// retryCounts.
var retryReasons = [...]string{"error", "panic", "timeout", "storage", "poison"}

// retryCounts are the fields of c in the order of retryReasons.
func retryCounts(c azdispatch.RetryCounts) [len(retryReasons)]int64 {
	return [...]int64{c.Error, c.Panic, c.Timeout, c.Storage, c.Poison}
}

// kindCount is one kind of transaction and its count.
type kindCount struct {
	name string
	n    int64
}

// queueKinds are the kinds of requests made on a queue. EmptyReceive is
// part of Receive, reported on its own instrument.
func queueKinds(t azdispatch.Transactions) []kindCount {
	return []kindCount{
		{"receive", t.Receive}, {"delete", t.Delete}, {"update", t.Update}, {"send", t.Send},
		{"depth", t.Depth}, {"create", t.Create}, {"other", t.Other},
	}
}

// blobKinds are the kinds of blob requests, which belong to the account.
func blobKinds(t azdispatch.Transactions) []kindCount {
	return []kindCount{
		{"blob_read", t.BlobRead}, {"blob_write", t.BlobWrite}, {"blob_delete", t.BlobDelete},
		{"blob_lease", t.BlobLease}, {"blob_list", t.BlobList},
	}
}
