package azdispatch

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBlobServiceURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ queue, override, want string }{
		{"https://acct.queue.core.windows.net/", "", "https://acct.blob.core.windows.net/"},
		{"https://acct.queue.core.windows.net/?sv=1&sig=x", "", "https://acct.blob.core.windows.net/?sv=1&sig=x"},
		{"http://127.0.0.1:10001/devstoreaccount1", "", ""},
		{"http://127.0.0.1:10001/devstoreaccount1", "http://127.0.0.1:10000/devstoreaccount1", "http://127.0.0.1:10000/devstoreaccount1"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, blobServiceURL(c.queue, &AccountOptions{BlobServiceURL: c.override}), c.queue)
	}
}

func TestAccountBlobServiceIsCounted(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	svc, err := a.blobService()
	require.NoError(t, err)
	before := a.Transactions()
	ctx, seen := CountTransactions(context.Background())
	_, err = svc.NewContainerClient(uniqueName(t)).Create(tagBlob(ctx, opBlobWrite), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1), a.Transactions().BlobWrite-before.BlobWrite)
	assert.Equal(t, Transactions{BlobWrite: 1}, seen())
	assert.Equal(t, int64(1), seen().Total())
}

func TestAccountWithoutBlobURL(t *testing.T) {
	t.Parallel()
	a, err := NewAccountWithSharedKey("http://127.0.0.1:1/devstoreaccount1", "devstoreaccount1", emulatorKey, nil)
	require.NoError(t, err)
	_, err = a.blobService()
	assert.ErrorIs(t, err, ErrNoBlobService)
}
