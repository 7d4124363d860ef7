package main

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// The chaos checker follows Jepsen's total-queue checker: every message
// sent carries a unique sequence number, and at the end each one is judged
// by what was sent and what was handled.
//
//   - lost: its send was acknowledged, but no handler ever finished it (and
//     it is not in the poison queue, where it counts as wrongly poisoned);
//   - unexpected: handled, but never sent, or sent and refused for certain
//     (the transport answered for the service without making the request);
//   - indeterminate: its send failed in a way that leaves open whether it
//     was enqueued (its response was lost, or the request timed out); those
//     that were handled are recovered, neither lost nor unexpected;
//   - duplicated: handled more than once;
//   - wrongly poisoned: in the poison queue, although the handler of this
//     scenario never fails.
//
// The duplicate bound. A handling is followed by another of the same
// message only if its acknowledgement (the delete) did not happen: once
// deleted, a message is gone. So every extra handling is paid for by a
// handling whose process never saw its delete succeed, counted from the
// workers' records as one of:
//
//   - a lost acknowledgement: its delete was made and did not succeed: its
//     response was lost (the retry then finds the message gone), or it
//     failed after the SDK's retries;
//   - in flight at a kill: its process was killed before the delete was
//     made or answered;
//   - an acknowledgement never sent: its process lived on but made no
//     delete, because the renewal under way when the handler returned
//     found the message lost (its own response lost, or too late). The
//     listener then counts the message in State.Lost and does not remember
//     it, so it may be handled again even in the same process.
//
// A listener that remembers a message whose delete failed
// (State.HandledBefore) deletes it on its next delivery without handling
// it again, and so spends none of this allowance when the message comes
// back to it. Duplicated handlings (each handling after a message's first)
// must not exceed the sum; more would mean a message handled again
// although its earlier handling had been acknowledged.

// sendStatus is what a send's caller knows of it.
type sendStatus int8

const (
	sendOK            sendStatus = iota + 1 // acknowledged: the service enqueued it
	sendIndeterminate                       // failed, and may or may not have been enqueued
	sendRefused                             // failed before any request was made: not enqueued
)

// incarnation is one run of one worker process: its record and how it ended.
type incarnation struct {
	worker, number int
	killed         bool
	status         workerStatus // its last report
	records        io.Reader
}

// verdict is what the checker found.
type verdict struct {
	Sent, Indeterminate, Recovered, Refused int
	Handled, Handlings                      int
	Lost, Unexpected                        int
	Duplicated, DuplicateHandlings          int
	KillInFlight, LostAcks                  int
	LostAcksUnsent                          int // of LostAcks, those never sent: no delete, in a process not killed
	WronglyPoisoned                         int
	Faults                                  map[string]int // from the records, by kind
	Malformed                               int            // record lines that could not be read
}

// bound is the most duplicated handlings the faults allow.
func (v verdict) bound() int { return v.KillInFlight + v.LostAcks }

// boundHeld reports whether the duplicates stayed within the bound.
func (v verdict) boundHeld() bool { return v.DuplicateHandlings <= v.bound() }

// ok reports whether the run passed.
func (v verdict) ok() bool {
	return v.Lost == 0 && v.Unexpected == 0 && v.WronglyPoisoned == 0 && v.boundHeld()
}

// check judges a run: the sends by sequence number, the workers' records,
// and the sequence numbers found in the poison queue.
func check(sends map[int]sendStatus, incs []incarnation, poisoned []int) (verdict, error) {
	v := verdict{Faults: map[string]int{}}
	handles := map[int]int{}
	for _, inc := range incs {
		handled, deleted, failed := map[string]int{}, map[string]int{}, map[string]int{}
		sc := bufio.NewScanner(inc.records)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) >= 4 && f[0] == recHandled:
				seq, err := strconv.Atoi(f[1])
				if err != nil {
					v.Malformed++
					continue
				}
				handles[seq]++
				handled[f[2]]++
			case len(f) >= 2 && f[0] == recDeleted:
				deleted[f[1]]++
			case len(f) >= 2 && f[0] == recFailed:
				failed[f[1]]++
			case len(f) >= 3 && f[0] == recFault:
				v.Faults[f[1]]++
			default:
				v.Malformed++
			}
		}
		if err := sc.Err(); err != nil {
			return v, err
		}
		for id, n := range handled {
			unacked := max(0, n-deleted[id])
			tried := min(unacked, failed[id])
			v.LostAcks += tried
			if inc.killed {
				v.KillInFlight += unacked - tried
			} else {
				v.LostAcks += unacked - tried
				v.LostAcksUnsent += unacked - tried
			}
		}
	}
	inPoison := map[int]bool{}
	for _, seq := range poisoned {
		inPoison[seq] = true
	}
	v.WronglyPoisoned = len(poisoned)
	for seq, st := range sends {
		switch st {
		case sendOK:
			v.Sent++
			if handles[seq] == 0 && !inPoison[seq] {
				v.Lost++
			}
		case sendIndeterminate:
			v.Indeterminate++
			if handles[seq] > 0 {
				v.Recovered++
			}
		case sendRefused:
			v.Refused++
		}
	}
	for seq, n := range handles {
		v.Handled++
		v.Handlings += n
		if st := sends[seq]; st != sendOK && st != sendIndeterminate {
			v.Unexpected++
		}
		if n > 1 {
			v.Duplicated++
			v.DuplicateHandlings += n - 1
		}
	}
	return v, nil
}
