package sourcetest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The backends differ from the service only in the fields the package
// documentation's table names for them.
func TestBehavioursDifferFromTheServiceOnlyWhereDocumented(t *testing.T) {
	t.Parallel()
	service := Service()
	assert.Equal(t, Answer{http.StatusNotFound, "MessageNotFound"}, service.StaleReceipt)
	assert.False(t, service.ExactDepth)

	azurite := Azurite()
	assert.Equal(t, Answer{http.StatusBadRequest, "PopReceiptMismatch"}, azurite.StaleReceipt)
	assert.True(t, azurite.ExactDepth)
	azurite.Name, azurite.StaleReceipt, azurite.ExactDepth, azurite.ClockSkew = service.Name, service.StaleReceipt, service.ExactDepth, service.ClockSkew
	assert.Equal(t, service, azurite)

	mem := Memqueue()
	assert.True(t, mem.ExactDepth)
	mem.Name, mem.ExactDepth, mem.ClockSkew = service.Name, service.ExactDepth, service.ClockSkew
	assert.Equal(t, service, mem, "memqueue follows the service")
}

func TestForConnectionStringKnowsTheEmulator(t *testing.T) {
	t.Parallel()
	assert.Equal(t, Azurite(), ForConnectionString("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=x;QueueEndpoint=http://127.0.0.1:1/devstoreaccount1;"))
	assert.Equal(t, Azurite(), ForConnectionString("UseDevelopmentStorage=true"))
	assert.Equal(t, Service(), ForConnectionString("DefaultEndpointsProtocol=https;AccountName=prod;AccountKey=x;EndpointSuffix=core.windows.net"))
}

func TestSweepIsAtLeastOneReceive(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 1, Behaviour{}.sweep())
	assert.Equal(t, 6, Behaviour{Sweep: 6}.sweep())
}
