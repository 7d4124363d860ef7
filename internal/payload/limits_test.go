package payload

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// defaultLimits returns the default limits.
func defaultLimits(t testing.TB) Limits {
	t.Helper()
	lim, err := Limits{}.WithDefaults()
	require.NoError(t, err)
	return lim
}

func TestLimitsWithDefaults(t *testing.T) {
	t.Parallel()
	defaults := Limits{MaxBlobSize: 64 << 20, MaxExpandedSize: 256 << 20, MaxItemSize: 16 << 20, MaxItems: 1_000_000}
	tests := []struct {
		name    string
		in      Limits
		want    Limits
		wantErr bool
	}{
		{"zero is the defaults", Limits{}, defaults, false},
		{"set fields are kept", Limits{MaxBlobSize: 1, MaxItems: 7},
			Limits{MaxBlobSize: 1, MaxExpandedSize: 256 << 20, MaxItemSize: 16 << 20, MaxItems: 7}, false},
		{"all set", Limits{MaxBlobSize: 1, MaxExpandedSize: 2, MaxItemSize: 3, MaxItems: 4},
			Limits{MaxBlobSize: 1, MaxExpandedSize: 2, MaxItemSize: 3, MaxItems: 4}, false},
		{"negative blob size", Limits{MaxBlobSize: -1}, Limits{}, true},
		{"negative expanded size", Limits{MaxExpandedSize: -1}, Limits{}, true},
		{"negative item size", Limits{MaxItemSize: -1}, Limits{}, true},
		{"negative items", Limits{MaxItems: -1}, Limits{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.in.WithDefaults()
			if tt.wantErr {
				assert.EqualError(t, err, "limits must be positive")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestPointerLimitsAreTheOnesAPointerClaims(t *testing.T) {
	t.Parallel()
	l := Limits{MaxBlobSize: 1, MaxExpandedSize: 2, MaxItemSize: 3, MaxItems: 4}
	assert.Equal(t, wire.Limits{MaxBlobSize: 1, MaxExpandedSize: 2, MaxItems: 4}, l.PointerLimits())
}
