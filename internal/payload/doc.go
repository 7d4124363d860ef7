// Package payload is the format of offloaded payloads: the framed, gzipped
// items of the blob itself (the pointer message that stands for it is the
// message text's, in package wire), the limits a reader enforces on both, the checkpoint of a
// batch's completed items, and the metadata a payload blob carries. It makes
// no request and does not depend on the Azure SDK: storing and fetching the
// blobs is the caller's business.
package payload
