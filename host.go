package azdispatch

import "net/url"

// Host is the host of the account's queue service, with its port when its
// URL names one: "myaccount.queue.core.windows.net", or "127.0.0.1:10001"
// for an emulator. Two accounts with the same [Account.Name] (two
// emulators, or one name in two clouds) differ in it. It is never more
// than the host: no scheme, path, query (a SAS) or credential, so it may
// be logged and shown. It makes no request.
func (a *Account) Host() string { return hostOf(a.service.URL()) }

// Host is the host of the queue's service, as [Account.Host] has it; for
// a queue opened by its own SAS URL (see [NewQueueWithSAS]), that URL's
// host, without its query.
func (q *Queue) Host() string { return hostOf(q.client.URL()) }

// hostOf is the host (and port) of a service URL; "" for one that does
// not parse.
func hostOf(serviceURL string) string {
	u, err := url.Parse(serviceURL)
	if err != nil {
		return ""
	}
	return u.Host
}
