package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		"QueueEndpoint=http://127.0.0.1:9/devstoreaccount1;BlobEndpoint=http://127.0.0.1:9/devstoreaccount1")
	cmd.Stdin = devNull
	r := runCmd(t, cmd, args)
	assert.Equal(t, exitUsage, r.code, "%s", r)
	assert.Contains(t, r.stderr, "without a terminal")
	assert.NotContains(t, r.stderr, "[y/N]", "nothing was asked")
}
