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
	addr, err := UnusedAddr()
	require.NoError(t, err)
	_, err = (&net.Dialer{}).DialContext(context.Background(), "tcp", addr)
	require.Error(t, err)
	assert.True(t, Refused(err), "%v", err)
	assert.False(t, Refused(errors.New("other")))
	assert.False(t, Refused(context.DeadlineExceeded))
}
