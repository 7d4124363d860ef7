package netx

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A dial to a port nothing listens on is refused; other errors are not.
func TestRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = (&net.Dialer{}).DialContext(context.Background(), "tcp", addr)
	require.Error(t, err)
	assert.True(t, Refused(err), "%v", err)
	assert.False(t, Refused(errors.New("other")))
	assert.False(t, Refused(context.DeadlineExceeded))
}
