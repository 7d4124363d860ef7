package azdispatch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func defaultLimits(t testing.TB) PayloadLimits {
	t.Helper()
	lim, err := PayloadLimits{}.withDefaults("test")
	require.NoError(t, err)
	return lim
}

func TestPayloadLimitsDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	lim := defaultLimits(t)
	assert.Equal(t, PayloadLimits{MaxBlobSize: 64 << 20, MaxExpandedSize: 256 << 20, MaxItemSize: 16 << 20, MaxItems: 1_000_000}, lim)
	_, err := PayloadLimits{MaxItems: -1}.withDefaults("ListenerOptions.Payloads.Limits")
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ListenerOptions.Payloads.Limits", ce.Field)
}
