package redact

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSecrets(t *testing.T) {
	for in, want := range map[string]string{
		"a=1;AccountKey=c2VjcmV0;b=2":                       "a=1;AccountKey=REDACTED;b=2",
		"Q=http://x;SharedAccessSignature=sv=1&sig=abc;B=y": "Q=http://x;SharedAccessSignature=REDACTED;B=y",
		"token sig=abc&se=1 expired":                        "token sig=REDACTED&se=1 expired",
		"next=%3Fsv%3D1%26sig%3DAbC%2B":                     "next=%3Fsv%3D1%26sig%3DREDACTED",
		"Authorization: SharedKey acct:c2VjcmV0":            "Authorization: SharedKey acct:REDACTED",
		"password=hunter2, then":                            "password=REDACTED, then",
		"nothing secret here: sig":                          "nothing secret here: sig",
	} {
		assert.Equal(t, want, Secrets(in), in)
	}
}

func TestURLs(t *testing.T) {
	for in, want := range map[string]string{
		`Get "https://a.queue.core.windows.net/q?sv=1&sig=x": refused`: `Get "https://a.queue.core.windows.net/q": refused`,
		"http://user:pass@host:8080/path?x=1#frag failed":              "http://host:8080/path failed",
		"see https://example.com/a.":                                   "see https://example.com/a.",
	} {
		assert.Equal(t, want, URLs(in), in)
	}
}

func TestURLErrorStripsTheURLAndKeepsTheCause(t *testing.T) {
	err := URLError(fmt.Errorf("sending: %w", &url.Error{Op: "Post", URL: "https://user:pw@acct.queue.core.windows.net/q?sv=1&sig=abc", Err: context.DeadlineExceeded}))
	assert.Equal(t, `Post "https://acct.queue.core.windows.net/q": context deadline exceeded`, err.Error())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	plain := errors.New("no URL here")
	assert.Same(t, plain, URLError(plain))
}
