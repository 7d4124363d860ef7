package azdispatch

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/service"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
)

// ErrNoBlobService is returned by features that need the account's blob
// service (payload offloading, leases) when its URL is not known: set
// AccountOptions.BlobServiceURL.
var ErrNoBlobService = errors.New("azdispatch: the account's blob service URL is unknown; set AccountOptions.BlobServiceURL")

// blobService returns the client of the account's blob service, which shares
// the queue client's credential, options and transaction counter.
func (a *Account) blobService() (*service.Client, error) {
	if a.blob == nil {
		return nil, ErrNoBlobService
	}
	return a.blob, nil
}

// tagBlob marks a blob request of kind o for counting.
func tagBlob(ctx context.Context, o op) context.Context { return tagRequest(ctx, o, nil) }

// blobOptions derives the blob client's options from the queue client's. The
// policies get slices of their own: the SDK appends to the ones it is given,
// and the two clients must not share a backing array.
func blobOptions(co *azqueue.ClientOptions) *service.ClientOptions {
	bo := &service.ClientOptions{ClientOptions: co.ClientOptions, Audience: co.Audience}
	bo.PerCallPolicies = append([]policy.Policy(nil), co.PerCallPolicies...)
	bo.PerRetryPolicies = append([]policy.Policy(nil), co.PerRetryPolicies...)
	return bo
}

// blobServiceURL returns the blob service URL of the account whose queue
// service is at queueURL, keeping its query (an account SAS): the service's
// host names differ only in "queue" and "blob". Other URLs (emulators,
// custom domains) give "", and opts.BlobServiceURL must name it.
func blobServiceURL(queueURL string, opts *AccountOptions) string {
	if opts != nil && opts.BlobServiceURL != "" {
		return opts.BlobServiceURL
	}
	u, err := url.Parse(queueURL)
	if err != nil {
		return ""
	}
	account, rest, ok := strings.Cut(u.Host, ".queue.")
	if !ok {
		return ""
	}
	u.Host = account + ".blob." + rest
	return u.String()
}
