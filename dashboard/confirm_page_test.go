package dashboard_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
)

// The confirmation does not put the keyboard on the destructive button
// (Enter would delete): it starts on Cancel. It says how many messages
// match, or that the message was not seen.
func TestTheConfirmationStartsOnCancelAndCountsTheMatches(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 3)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})

	_, _, body := get(t, srv, "confirm?do=purge-all")
	assert.NotRegexp(t, regexp.MustCompile(`<button[^>]*autofocus`), body, "no autofocus on a button")
	assert.Regexp(t, regexp.MustCompile(`<a [^>]*class="button cancel" autofocus>Cancel</a>`), body)
	assert.Contains(t, body, "3 messages match, by the last peek.")

	_, _, body = get(t, srv, "confirm?do=purge-all&reason=nothing+like+it")
	assert.Contains(t, body, "No message matches")

	_, _, body = get(t, srv, "poison")
	id := ids(body)[0]
	_, _, body = get(t, srv, "confirm?do=purge&pq=orders-poison&batch=&item=0&id="+id)
	assert.Contains(t, body, "1 message matches")
	_, _, body = get(t, srv, "confirm?do=requeue&pq=orders-poison&batch=&item=0&id=gone")
	assert.Contains(t, body, "The last peek did not see this message")
	assert.Equal(t, 3, depth(t, q.PoisonQueue()), "a confirmation changes nothing")
}
