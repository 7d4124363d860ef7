package azdispatch

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/service"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"golang.org/x/time/rate"

	"github.com/azdispatch/azdispatch/internal/connstr"
	"github.com/azdispatch/azdispatch/internal/netx"
	"github.com/azdispatch/azdispatch/internal/redact"
	"github.com/azdispatch/azdispatch/internal/svcclock"
)

// Account is one storage account's queue service: a client with its
// credential, a transaction counter, and the queues opened through it.
// It is safe for concurrent use.
type Account struct {
	name    string // for logs and errors; never a credential
	service *azqueue.ServiceClient
	blob    *service.Client // nil when the blob service URL is unknown
	tx      *counter
	retry   policy.RetryOptions // the clients' retry options, which blob downloads adapt
	// clock is the service's time, set by every answer of the account's
	// queue and blob clients (see svcclock.Policy).
	clock *svcclock.Clock

	mu     sync.Mutex
	queues map[string]*Queue
}

// AccountOptions configures the client of an [Account]. Nil means defaults.
type AccountOptions struct {
	// Client is passed to the Azure SDK: retries, transport, telemetry, the
	// token audience. Nil or zero fields mean the SDK's defaults, with two
	// exceptions. Transport defaults to an HTTP client that keeps up to 128
	// idle connections per host, because the SDK's default keeps 10 and a
	// listener deleting messages in parallel would open a new TCP (and TLS)
	// connection for most requests. Retry.TryTimeout defaults to 30 s, so a
	// request on a dead connection cannot stall a dequeuer forever.
	Client *azqueue.ClientOptions

	// BlobServiceURL is the account's blob service, used for offloaded
	// payloads and leases. It defaults to the queue service URL with "queue"
	// replaced by "blob" in the host name (and, for a connection string, to
	// its BlobEndpoint); set it for emulators and custom domains. An account
	// SAS in the URL must cover the blob service too.
	BlobServiceURL string

	// Limiter paces every request of the account to a rate, so that this
	// process stays under the account's scalability target (about 20,000
	// requests per second) rather than meeting it as 503 ServerBusy
	// answers, each a request spent for nothing and a delay. Every HTTP
	// attempt of the account's queue and blob clients waits for its turn,
	// deletes and a lease's renewals too; a retry takes a turn without
	// waiting (the SDK's retry back-off is its wait), which makes later
	// requests wait the longer. The wait comes before the SDK's
	// TryTimeout starts, so that a wait in line does not use up the time
	// a request has on the wire. Several [Account] values of one storage
	// account in a process may share a limiter.
	//
	// The rate is this process's share: the service counts the account's
	// requests from every client, so a fleet of n processes gives each 1/n
	// of what it means to use, with some headroom (say 90%), since the
	// service does not say over what window it measures. A burst of a
	// tenth of a second's worth suits it:
	// [rate.NewLimiter](r, max(1, int(r/10))). Nil, the default, means no
	// pacing.
	Limiter *rate.Limiter
}

// emulatorKey is the published, well-known key of the Azure Storage emulator's
// devstoreaccount1. It is not a secret.
const emulatorKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// NewAccountFromConnectionString opens the account a connection string
// names: with AccountName and AccountKey, with SharedAccessSignature, or
// "UseDevelopmentStorage=true" for an emulator on its default ports.
func NewAccountFromConnectionString(connectionString string, opts *AccountOptions) (*Account, error) {
	// White space around it (the end of line of a file it was read from)
	// is no part of it.
	connectionString = strings.TrimSpace(connectionString)
	if strings.EqualFold(strings.TrimRight(connectionString, ";"), "UseDevelopmentStorage=true") {
		connectionString = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + emulatorKey +
			";BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"
	}
	// What is wrong with the string, said without a value from it: it
	// holds a key or a signature.
	if why := connstr.Diagnose(connectionString); why != "" {
		return nil, &ConfigError{Field: "connection string", Reason: why + " (it needs AccountName and AccountKey, SharedAccessSignature, or UseDevelopmentStorage=true)"}
	}
	co, tx, clock := clientOptions(opts)
	svc, err := azqueue.NewServiceClientFromConnectionString(connectionString, co)
	if err != nil {
		// The SDK's message does not quote the string, but be sure: never
		// echo it.
		return nil, &ConfigError{Field: "connection string", Reason: "the Azure SDK cannot read it (it needs AccountName and AccountKey, SharedAccessSignature, or UseDevelopmentStorage=true)"}
	}
	a := newAccount(svc, tx, clock, co)
	if opts != nil && opts.BlobServiceURL != "" {
		// An explicit URL wins; the string's key or signature still applies.
		a.blob = blobClientFromConnectionString(replaceBlobEndpoint(connectionString, opts.BlobServiceURL), co)
	} else {
		a.blob = blobClientFromConnectionString(connectionString, co)
	}
	return a, nil
}

// blobClientFromConnectionString returns nil when the string names no blob
// service; features that need one then fail with [ErrNoBlobService].
func blobClientFromConnectionString(connectionString string, co *azqueue.ClientOptions) *service.Client {
	c, err := service.NewClientFromConnectionString(connectionString, blobOptions(co))
	if err != nil {
		return nil
	}
	return c
}

// replaceBlobEndpoint sets the BlobEndpoint of a connection string.
func replaceBlobEndpoint(connectionString, endpoint string) string {
	var kept []string
	for _, part := range strings.Split(connectionString, ";") {
		if k, _, _ := strings.Cut(part, "="); !strings.EqualFold(strings.TrimSpace(k), "BlobEndpoint") && part != "" {
			kept = append(kept, part)
		}
	}
	return strings.Join(append(kept, "BlobEndpoint="+endpoint), ";")
}

// NewAccount opens the account at serviceURL (https://<account>.queue.core.windows.net/)
// with a Microsoft Entra ID credential, such as azidentity.NewDefaultAzureCredential's.
func NewAccount(serviceURL string, cred azcore.TokenCredential, opts *AccountOptions) (*Account, error) {
	if cred == nil {
		return nil, &ConfigError{Field: "credential", Reason: "nil"}
	}
	co, tx, clock := clientOptions(opts)
	svc, err := azqueue.NewServiceClient(serviceURL, cred, co)
	if err != nil {
		return nil, wrapf(err, "new account client")
	}
	a := newAccount(svc, tx, clock, co)
	if u := blobServiceURL(serviceURL, opts); u != "" {
		if a.blob, err = service.NewClient(u, cred, blobOptions(co)); err != nil {
			return nil, wrapf(err, "new blob client")
		}
	}
	return a, nil
}

// errBadAccountKey is the error of an account key that is not base64. It
// never quotes the key.
var errBadAccountKey = &ConfigError{Field: "account key", Reason: "must be base64"}

// NewAccountWithSharedKey opens the account at serviceURL with its name and
// one of its access keys.
func NewAccountWithSharedKey(serviceURL, accountName, accountKey string, opts *AccountOptions) (*Account, error) {
	cred, err := azqueue.NewSharedKeyCredential(accountName, accountKey)
	if err != nil {
		return nil, errBadAccountKey
	}
	co, tx, clock := clientOptions(opts)
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential(serviceURL, cred, co)
	if err != nil {
		return nil, wrapf(err, "new account client")
	}
	a := newAccount(svc, tx, clock, co)
	if u := blobServiceURL(serviceURL, opts); u != "" {
		bcred, err := service.NewSharedKeyCredential(accountName, accountKey)
		if err != nil {
			return nil, errBadAccountKey
		}
		if a.blob, err = service.NewClientWithSharedKeyCredential(u, bcred, blobOptions(co)); err != nil {
			return nil, wrapf(err, "new blob client")
		}
	}
	return a, nil
}

// NewAccountWithSAS opens an account through a service URL that carries an
// account SAS token in its query (https://<account>.queue.core.windows.net/?sv=…&sig=…).
// The token must allow what the queues will do: for a listener, process,
// update and read (the depth), add and create for its poison queue; for a
// publisher, add, and create if its queue may be missing. Offloaded
// payloads need the blob service too: a token for both (ss=bq), or the blob
// service's own in [AccountOptions.BlobServiceURL]. The README's Permissions
// section lists each permission and what fails without it. For a SAS scoped to
// one queue, use [NewQueueWithSAS]: a URL with no SAS token, or with a
// service SAS (no ss= in its query), is refused with a [*ConfigError] that
// says so.
func NewAccountWithSAS(serviceURLWithSAS string, opts *AccountOptions) (*Account, error) {
	if err := checkSAS("service URL", serviceURLWithSAS, true); err != nil {
		return nil, err
	}
	co, tx, clock := clientOptions(opts)
	svc, err := azqueue.NewServiceClientWithNoCredential(serviceURLWithSAS, co)
	if err != nil {
		return nil, wrapf(redact.URLError(err), "new account client")
	}
	a := newAccount(svc, tx, clock, co)
	if u := blobServiceURL(serviceURLWithSAS, opts); u != "" {
		if a.blob, err = service.NewClientWithNoCredential(u, blobOptions(co)); err != nil {
			return nil, wrapf(redact.URLError(err), "new blob client")
		}
	}
	return a, nil
}

func newAccount(svc *azqueue.ServiceClient, tx *counter, clock *svcclock.Clock, co *azqueue.ClientOptions) *Account {
	return &Account{name: accountName(svc.URL()), service: svc, tx: tx, clock: clock, retry: co.Retry, queues: make(map[string]*Queue)}
}

// Name is the account's name as its URL shows it (for logs; never a credential).
func (a *Account) Name() string { return a.name }

// Transactions counts every request made through this account's client.
func (a *Account) Transactions() Transactions { return a.tx.snapshot() }

// Queues returns the queues opened through this account so far (by [Account.Queue],
// as poison queues or as shards), sorted by name: for metrics that report
// each queue's [Transactions].
func (a *Account) Queues() []*Queue {
	a.mu.Lock()
	qs := make([]*Queue, 0, len(a.queues))
	for _, q := range a.queues {
		qs = append(qs, q)
	}
	a.mu.Unlock()
	slices.SortFunc(qs, func(x, y *Queue) int { return strings.Compare(x.name, y.name) })
	return qs
}

// QueueNames lists the names of this account's queues that start with
// prefix, sorted, in one List Queues request per 5,000 names: for tools
// that find which queues exist, such as which shards of a set were created.
// It needs permission to list the account's queues, which a SAS for one
// queue does not give.
func (a *Account) QueueNames(ctx context.Context, prefix string) ([]string, error) {
	pager := a.service.NewListQueuesPager(&azqueue.ListQueuesOptions{Prefix: &prefix})
	var names []string
	for pager.More() {
		page, err := pager.NextPage(tagRequest(ctx, opOther, nil))
		if err != nil {
			return nil, storageError(opOther, prefix+"*", err)
		}
		for _, q := range page.Queues {
			if q != nil && q.Name != nil {
				names = append(names, *q.Name)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// Queue returns the queue called name in this account: 3 to 56 lowercase
// letters, digits and single inner hyphens (the service allows 63; the rest
// is kept for the "-poison" suffix of its poison queue). It makes no request:
// the queue is created when a send first finds it missing. The
// same [*Queue] is returned for the same name, so that listeners and
// publishers in one process share it.
func (a *Account) Queue(name string) (*Queue, error) {
	return a.queue(name, len(poisonSuffix))
}

// queue opens name, keeping room for a suffix of reserve bytes in its name.
func (a *Account) queue(name string, reserve int) (*Queue, error) {
	if err := validateQueueName(name, reserve); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if q, ok := a.queues[name]; ok {
		return q, nil
	}
	q := &Queue{name: name, account: a, client: a.service.NewQueueClient(name), tx: new(counter), clock: a.clock}
	a.queues[name] = q
	return q, nil
}

// NewQueueWithSAS opens one queue through its URL with a SAS token scoped to
// it (https://<account>.queue.core.windows.net/<queue>?sv=…&sig=…). Such a
// queue has no default poison queue: give the listener one. A URL with no
// SAS token (no sig= in its query) is refused with a [*ConfigError].
func NewQueueWithSAS(queueURLWithSAS string, opts *AccountOptions) (*Queue, error) {
	if err := checkSAS("queue URL", queueURLWithSAS, false); err != nil {
		return nil, err
	}
	u, err := url.Parse(queueURLWithSAS)
	if err != nil {
		return nil, &ConfigError{Field: "queue URL", Reason: "it does not parse"}
	}
	name, ok := queueInPath(u)
	if !ok {
		return nil, &ConfigError{Field: "queue URL", Reason: "it names no queue: give the queue's URL, https://<account>.queue.core.windows.net/<queue>?<SAS> " +
			"(an emulator's: http://127.0.0.1:10001/<account>/<queue>?<SAS>); an account SAS URL opens with NewAccountWithSAS"}
	}
	if err := validateQueueName(name, 0); err != nil {
		return nil, err
	}
	// With no account, the pipeline's account-wide counter goes unused: the
	// queue's own counter sees every request.
	co, _, clock := clientOptions(opts)
	client, err := azqueue.NewQueueClientWithNoCredential(queueURLWithSAS, co)
	if err != nil {
		return nil, wrapf(redact.URLError(err), "new queue client")
	}
	return &Queue{name: name, client: client, tx: new(counter), clock: clock}, nil
}

// checkSAS refuses a URL (field names it) that carries no SAS token, and,
// for an account, one whose token is a service SAS, scoped to a single
// queue or container, which cannot reach the account's other queues (nor
// a poison queue beside each). It never quotes the URL: its query is the
// secret.
func checkSAS(field, rawURL string, account bool) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return &ConfigError{Field: field, Reason: "it does not parse"}
	}
	q := u.Query()
	switch {
	case q.Get("sig") == "":
		return &ConfigError{Field: field, Reason: "it carries no SAS token (no sig= in its query): append the token to the URL, after a ?"}
	case account && q.Get("ss") == "":
		return &ConfigError{Field: field, Reason: "its SAS token is a service SAS (it has no ss=), scoped to one queue or container: " +
			"give that queue's URL to NewQueueWithSAS, or make an account SAS (ss=q, or ss=bq with payloads)"}
	}
	return nil
}

// clientOptions copies the caller's SDK options, fills our defaults and adds
// the pacing, counting and clock policies: it returns the counter and the
// clock those set. The caller's struct and slices are not modified: the
// SDK appends its own policies to the slices it is given.
func clientOptions(opts *AccountOptions) (*azqueue.ClientOptions, *counter, *svcclock.Clock) {
	var co azqueue.ClientOptions
	if opts != nil && opts.Client != nil {
		co = *opts.Client
	}
	if co.Transport == nil {
		co.Transport = newHTTPClient()
	}
	// A listener's receive whose connection is refused is reported now,
	// and retried after the listener's back-off (see failFastRefused); a
	// send, a delete or a lease keeps the SDK's retries, which carry it
	// over an endpoint still starting.
	co.Transport = netx.FailFast{Next: co.Transport, When: askedToFailFast}
	if co.Retry.TryTimeout == 0 {
		co.Retry.TryTimeout = 30 * time.Second
	}
	tx := new(counter)
	co.PerCallPolicies = append([]policy.Policy(nil), co.PerCallPolicies...)
	co.PerRetryPolicies = append([]policy.Policy(nil), co.PerRetryPolicies...)
	if opts != nil && opts.Limiter != nil {
		co.PerCallPolicies = append(co.PerCallPolicies, limitPolicy{limiter: opts.Limiter})
		co.PerRetryPolicies = append(co.PerRetryPolicies, limitRetryPolicy{limiter: opts.Limiter})
	}
	clock := new(svcclock.Clock)
	co.PerRetryPolicies = append(co.PerRetryPolicies, countingPolicy{account: tx}, svcclock.Policy{Clock: clock})
	return &co, tx, clock
}

// errNoTurnBeforeDeadline is the error of a request whose turn under
// AccountOptions.Limiter would come after its context's deadline: the
// caller's deadline, met early, so it matches context.DeadlineExceeded,
// and no storage's fault (a sharded queue does not back its shard off
// for it).
var errNoTurnBeforeDeadline = wrapf(context.DeadlineExceeded, "no turn of AccountOptions.Limiter before the context's deadline")

// The limiter sits in an account's pipeline twice. limitPolicy, per call,
// waits for the first attempt's turn on the caller's context, before the
// SDK's retry policy starts the attempt's TryTimeout; limitRetryPolicy, per
// attempt, takes a turn for each retry without waiting for it. Both sit
// before the counting policy, so that an attempt is counted when it is
// sent, not when it starts to wait.
type (
	limitPolicy      struct{ limiter *rate.Limiter }
	limitRetryPolicy struct{ limiter *rate.Limiter }
	attemptsKey      struct{}
)

func (p limitPolicy) Do(req *policy.Request) (*http.Response, error) {
	ctx := req.Raw().Context()
	if err := p.limiter.Wait(ctx); err != nil {
		_, deadline := ctx.Deadline()
		switch {
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case deadline && p.limiter.Burst() > 0:
			// The limiter refuses at once a wait that would outlast the
			// context; that is the context's deadline, met early.
			return nil, errNoTurnBeforeDeadline
		}
		return nil, wrapf(err, "AccountOptions.Limiter")
	}
	return req.WithContext(context.WithValue(ctx, attemptsKey{}, new(atomic.Int32))).Next()
}

func (p limitRetryPolicy) Do(req *policy.Request) (*http.Response, error) {
	if attempts, _ := req.Raw().Context().Value(attemptsKey{}).(*atomic.Int32); attempts != nil && attempts.Add(1) > 1 {
		p.limiter.Reserve()
	}
	return req.Next()
}

// newHTTPClient returns a client like net/http's default, keeping enough idle
// connections per host for a listener's parallel deletes.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}}
}

// accountName reads the account name off a service URL: the first label of
// the host, or the first path segment for emulator-style URLs.
func accountName(serviceURL string) string {
	u, err := url.Parse(serviceURL)
	if err != nil {
		return ""
	}
	if seg, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/"); seg != "" {
		return seg
	}
	host, _, _ := strings.Cut(u.Hostname(), ".")
	return host
}

// validateQueueName applies the service's naming rules, keeping room for a
// suffix the package may append (the poison queue's).
func validateQueueName(name string, suffix int) error {
	return validateName("queue name", name, suffix)
}

// validateName applies the naming rules queues and blob containers share;
// field names which, for the error.
func validateName(field, name string, suffix int) error {
	bad := func(reason string) error {
		return &ConfigError{Field: field, Reason: fmt.Sprintf("%q %s", name, reason)}
	}
	if len(name) < 3 || len(name)+suffix > 63 {
		return bad(fmt.Sprintf("must be 3 to %d characters long", 63-suffix))
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r == '-' && i > 0 && i < len(name)-1 && name[i-1] != '-':
		default:
			return bad("may hold only lowercase letters, digits and single inner hyphens")
		}
	}
	return nil
}

// blobService returns the client of the account's blob service, which shares
// the queue client's credential, options and transaction counter.
func (a *Account) blobService() (*service.Client, error) {
	if a.blob == nil {
		return nil, fmt.Errorf("%w: the account's blob service URL is unknown; set AccountOptions.BlobServiceURL", ErrNoBlobService)
	}
	return a.blob, nil
}

// tagBlob marks a blob request of kind o for counting.
func tagBlob(ctx context.Context, o Op) context.Context { return tagRequest(ctx, o, nil) }

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

type failFastKey struct{}

// failFastRefused returns a copy of ctx whose requests fail at once when
// their connection is refused (see netx.FailFast): a listener's receives,
// so that a dead endpoint is reported (Ready) within a second rather than
// after the SDK's retries of three receives, half a minute.
func failFastRefused(ctx context.Context) context.Context {
	return context.WithValue(ctx, failFastKey{}, true)
}

func askedToFailFast(req *http.Request) bool { return req.Context().Value(failFastKey{}) != nil }

// queueInPath is the queue a queue URL's path names: its last segment, of
// one, or of two for an emulator's path-style URL (/<account>/<queue>),
// which is what a host that is an address (or localhost) needs; a named
// host may serve either (an emulator under a name of its own). ok is false
// when the path names no queue, as an account's URL on an address does.
func queueInPath(u *url.URL) (name string, ok bool) {
	segments := strings.Split(strings.Trim(u.Path, "/"), "/")
	if host := u.Hostname(); (host == "localhost" || net.ParseIP(host) != nil) && len(segments) != 2 {
		return "", false
	}
	if len(segments) > 2 || segments[len(segments)-1] == "" {
		return "", false
	}
	return segments[len(segments)-1], true
}

// Host is the host of the account's queue service, with its port when its
// URL names one: "myaccount.queue.core.windows.net", or "127.0.0.1:10001"
// for an emulator. Two accounts with the same [Account.Name] (two
// emulators, or one name in two clouds) differ in it. It is never more
// than the host: no scheme, path, query (a SAS) or credential, so it may
// be logged and shown. It makes no request.
func (a *Account) Host() string { return hostOf(a.service.URL()) }

// hostOf is the host (and port) of a service URL; "" for one that does
// not parse.
func hostOf(serviceURL string) string {
	u, err := url.Parse(serviceURL)
	if err != nil {
		return ""
	}
	return u.Host
}
