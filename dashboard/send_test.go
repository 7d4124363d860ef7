package dashboard_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A made-up default body ({"test":true}) decoded as a valid order, and a
// real handler shipped it. The form has no default text, and says that
// the handler will process what is sent.
func TestTheTestSendFormHasNoDefaultAndSaysTheHandlerWillProcessIt(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	status, _, body := get(t, srv, "")
	assert.Equal(t, http.StatusOK, status)
	assert.Regexp(t, `<textarea name="text"[^>]* required[^>]*></textarea>`, body, "empty, and required")
	assert.NotContains(t, body, `{"test":true}`)
	assert.NotContains(t, body, `{&#34;test&#34;:true}`)
	assert.Regexp(t, `<textarea[^>]* aria-describedby="send-warning"`, body)
	assert.Contains(t, body, `id="send-warning"`)
	assert.Contains(t, body, "The listener's handler will receive it and process it like any other message")
}

// An empty text (or one of white space only) is refused, saying why and
// what a text would do; nothing is sent.
func TestAnEmptyTestSendIsRefused(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	for _, text := range []string{"", " ", "\n\t "} {
		status, _, body := post(t, srv, url.Values{"do": {"send"}, "queue": {"orders"}, "text": {text}})
		assert.Equal(t, http.StatusBadRequest, status, "%q", text)
		assert.Contains(t, body, "the test message is empty, and there is no default", "%q", text)
		assert.Contains(t, body, "it will process it like any other message", "%q", text)
	}
	status, _, _ := post(t, srv, url.Values{"do": {"send"}, "queue": {"orders"}})
	assert.Equal(t, http.StatusBadRequest, status, "no text field at all")
	assert.Equal(t, 0, depth(t, q), "nothing was sent")

	status, hd, _ := post(t, srv, url.Values{"do": {"send"}, "queue": {"orders"}, "text": {`{"order":42}`}})
	assert.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "./?done=sent", hd.Get("Location"))
	assert.Equal(t, 1, depth(t, q))
	_, _, body := get(t, srv, "?done=sent")
	assert.Contains(t, body, "will process it like any other message")
}
