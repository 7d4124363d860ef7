package azdispatch

import (
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch/internal/storagefault"
)

// answeringAccount opens the emulator with answer in front of it (see
// storagefault.Transport) and no SDK retries, so that each call the
// listener makes is one HTTP attempt.
func answeringAccount(t testing.TB, answer func(*http.Request) *http.Response) *Account {
	t.Helper()
	return testAccount(t, &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: &storagefault.Transport{Next: newHTTPClient(), Answer: answer},
		Retry:     policy.RetryOptions{MaxRetries: -1, RetryDelay: time.Millisecond},
	}}})
}
