package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/netx"
)

// A purge whose stdin is /dev/null, a character device but no terminal, is
// refused as with no terminal at all: nothing is asked, nothing deleted.
// Its storage is a closed port: the refusal comes before any request.
func TestPurgeWithStdinFromDevNullIsRefused(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devNull.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"poison", "purge", "-queue", "orders"}
	cmd := exec.CommandContext(ctx, harness.bin, args...)
	cmd.Env = append(os.Environ(), "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"+
		"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"+
		"QueueEndpoint=http://"+closedPort(t)+"/devstoreaccount1;BlobEndpoint=http://"+closedPort(t)+"/devstoreaccount1")
	cmd.Stdin = devNull
	r := runCmd(t, cmd, args)
	assert.Equal(t, exitUsage, r.code, "%s", r)
	assert.Contains(t, r.stderr, "without a terminal")
	assert.NotContains(t, r.stderr, "[y/N]", "nothing was asked")
}

// Against a port where nothing listens, depth fails at once with the
// refused connection, instead of waiting out the SDK's retries (about 10 s
// of silence). The bound leaves room for a loaded machine.
func TestDepthAgainstAClosedPortAnswersAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"depth", "-queue", "orders"}
	cmd := exec.CommandContext(ctx, harness.bin, args...)
	cmd.Env = append(os.Environ(), "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"+
		"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"+
		"QueueEndpoint=http://"+closedPort(t)+"/devstoreaccount1;BlobEndpoint=http://"+closedPort(t)+"/devstoreaccount1")
	start := time.Now()
	r := runCmd(t, cmd, args)
	took := time.Since(start)
	t.Logf("answered in %v", took.Round(time.Millisecond))
	assert.Equal(t, exitFailed, r.code, "%s", r)
	assert.Contains(t, r.stderr, "refused")
	assert.Less(t, took, 5*time.Second, "against about 10 s of the SDK's retries")
}

// closedPort returns an address on this machine where nothing listens.
func closedPort(t *testing.T) string {
	addr, err := netx.UnusedAddr()
	require.NoError(t, err)
	return addr
}
