package storagefault

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTransportAnswersChosenRequestsAndPassesTheRestOn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "from the server")
	}))
	defer srv.Close()
	tr := &Transport{Answer: func(req *http.Request) *http.Response {
		if IsReceive(req) {
			return ServiceError(req, http.StatusServiceUnavailable, "ServerBusy", http.Header{"Retry-After": {"2"}})
		}
		return nil
	}}

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/acct/q/messages", nil)
	require.NoError(t, err)
	resp, err := tr.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "ServerBusy", resp.Header.Get("X-Ms-Error-Code"))
	assert.Equal(t, "2", resp.Header.Get("Retry-After"))
	assert.Contains(t, string(body), "<Code>ServerBusy</Code>")

	req, err = http.NewRequest(http.MethodPut, srv.URL+"/acct/q", nil)
	require.NoError(t, err)
	resp, err = tr.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "from the server", string(body))
}
