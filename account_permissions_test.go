package azdispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	blobsas "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	queuesas "github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// The least privilege of each role, as the README's Permissions section
// gives it: one account SAS for the queue service and one for the blob
// service. (The Go SDK signs an account SAS for one service at a time; one
// token with ss=bq and the union of both would do as well.)
//
// Azurite enforces account SAS services, resource types and permissions per
// operation, as the service does, with one difference found in its source
// (src/queue/authentication/OperationAccountSASPermission.ts): it checks
// Delete Message and Update Message against the Container resource type
// where the service documents Object. Both roles need srt=co anyway.
var (
	publisherGrants = roleGrants{
		queue: grant{srt: "co", perms: "ac"}, // Put Message; Create Queue when missing
		blob:  grant{srt: "co", perms: "c"},  // Put Blob (new blobs only); Create Container when missing
	}
	listenerGrants = roleGrants{
		// Get Messages, Delete Message (p); Update Message (u); Get Queue
		// Metadata for the depth (r, Container); Put Message to the poison
		// queue (a) and Create Queue when it is missing (c, Container).
		queue: grant{srt: "co", perms: "racup"},
		// Get Blob and Get Blob Properties (r); Set Blob Metadata (w):
		// checkpoints, marking poisoned; Delete Blob after success (d).
		blob: grant{srt: "o", perms: "rwd"},
	}
)

// grant is what one account SAS allows: resource types (srt) and permissions (sp).
type grant struct{ srt, perms string }

// roleGrants are a role's account SAS tokens, one per service.
type roleGrants struct{ queue, blob grant }

// need is one thing an operation asks of an account SAS: on a service ('q'
// or 'b'), a resource type letter and a permission letter.
type need struct{ service, srt, perm byte }

// sasOp is one storage operation a role makes, with what it needs.
type sasOp struct {
	name  string
	needs []need
	// azurite, if set, is what Azurite asks for instead of needs (see
	// above). What only one of them asks for may or may not be refused.
	azurite []need
	run     func(ctx context.Context, t *testing.T, r *sasRig) error
}

// removal is one thing taken away from a role's grants: a permission ('p'),
// a resource type ('t') or, by signing the token for the other service, the
// service itself ('s').
type removal struct {
	service, kind, letter byte
}

func (rm removal) String() string {
	svc := map[byte]string{'q': "queue", 'b': "blob"}[rm.service]
	switch rm.kind {
	case 'p':
		return "without " + svc + " sp=" + string(rm.letter)
	case 't':
		return "without " + svc + " srt=" + string(rm.letter)
	}
	return "without the " + svc + " service"
}

// hits reports whether n is what rm takes away.
func (rm removal) hits(n need) bool {
	if n.service != rm.service {
		return false
	}
	switch rm.kind {
	case 'p':
		return n.perm == rm.letter
	case 't':
		return n.srt == rm.letter
	}
	return true
}

// refusal is the error code and the part of the message that name what rm took away.
func (rm removal) refusal() (code, says string) {
	names := map[byte]string{'r': "Read", 'w': "Write", 'd': "Delete", 'l': "List", 'a': "Add", 'c': "Create", 'u': "Update", 'p': "Process"}
	switch rm.kind {
	case 'p':
		return "AuthorizationPermissionMismatch", "needs the " + names[rm.letter] + " permission"
	case 't':
		return "AuthorizationResourceTypeMismatch", "the " + map[byte]string{'o': "Object", 'c': "Container", 's': "Service"}[rm.letter] + " resource type"
	}
	return "AuthorizationServiceMismatch", "the " + map[byte]string{'q': "Queue", 'b': "Blob"}[rm.service] + " service"
}

// removals lists every single thing that can be taken from g.
func (g roleGrants) removals() []removal {
	var out []removal
	for _, s := range []struct {
		service byte
		g       grant
	}{{'q', g.queue}, {'b', g.blob}} {
		for i := range len(s.g.perms) {
			out = append(out, removal{s.service, 'p', s.g.perms[i]})
		}
		for i := range len(s.g.srt) {
			out = append(out, removal{s.service, 't', s.g.srt[i]})
		}
		out = append(out, removal{service: s.service, kind: 's'})
	}
	return out
}

// apply returns g without what rm takes, as the queue and blob tokens.
func (g roleGrants) apply(t testing.TB, rm *removal) (queueToken, blobToken string) {
	q, b := g.queue, g.blob
	drop := func(gr grant, service byte) grant {
		if rm == nil || rm.service != service {
			return gr
		}
		switch rm.kind {
		case 'p':
			// A SAS must allow something: List is needed by neither role.
			gr.perms = cmpOr(strings.ReplaceAll(gr.perms, string(rm.letter), ""), "l")
		case 't':
			// Likewise the Service resource type.
			gr.srt = cmpOr(strings.ReplaceAll(gr.srt, string(rm.letter), ""), "s")
		}
		return gr
	}
	q, b = drop(q, 'q'), drop(b, 'b')
	queueToken, blobToken = accountSAS(t, 'q', q), accountSAS(t, 'b', b)
	switch {
	case rm != nil && rm.kind == 's' && rm.service == 'q':
		queueToken = accountSAS(t, 'b', q) // a blob service token on the queue service
	case rm != nil && rm.kind == 's' && rm.service == 'b':
		blobToken = accountSAS(t, 'q', b)
	}
	return queueToken, blobToken
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// accountSAS signs an account SAS for one service ('q' or 'b') with the
// emulator's key, as a user would with the Go SDK's sas packages.
func accountSAS(t testing.TB, service byte, g grant) string {
	t.Helper()
	name, key := emulatorFor(t).AccountName(), emulatorFor(t).AccountKey()
	require.NotEmpty(t, key, "signing an account SAS needs the account key in the connection string")
	expiry := time.Now().Add(time.Hour)
	if service == 'q' {
		cred, err := azqueue.NewSharedKeyCredential(name, key)
		require.NoError(t, err)
		p, err := queuesas.AccountSignatureValues{Protocol: queuesas.ProtocolHTTPSandHTTP, ExpiryTime: expiry,
			Permissions: g.perms, ResourceTypes: g.srt}.SignWithSharedKey(cred)
		require.NoError(t, err)
		return p.Encode()
	}
	cred, err := azblob.NewSharedKeyCredential(name, key)
	require.NoError(t, err)
	p, err := blobsas.AccountSignatureValues{Protocol: blobsas.ProtocolHTTPSandHTTP, ExpiryTime: expiry,
		Permissions: g.perms, ResourceTypes: g.srt}.SignWithSharedKey(cred)
	require.NoError(t, err)
	return p.Encode()
}

// sasRig is an account opened with the account key, to prepare and check,
// and one opened with a role's SAS tokens, to test; both see the same
// payload container, unique to the test.
type sasRig struct {
	admin, sas *Account
	container  string
}

func newSASRig(t *testing.T, g roleGrants, rm *removal) *sasRig {
	t.Helper()
	admin := testAccount(t, nil)
	queueToken, blobToken := g.apply(t, rm)
	a, err := NewAccountWithSAS(emulatorFor(t).QueueEndpoint()+"?"+queueToken,
		&AccountOptions{BlobServiceURL: emulatorFor(t).BlobEndpoint() + "?" + blobToken})
	require.NoError(t, err)
	return &sasRig{admin: admin, sas: a, container: uniqueName(t)}
}

// queues returns a new queue name opened in both accounts.
func (r *sasRig) queues(t *testing.T) (admin, sas *Queue) {
	t.Helper()
	name := uniqueName(t)
	admin, err := r.admin.Queue(name)
	require.NoError(t, err)
	sas, err = r.sas.Queue(name)
	require.NoError(t, err)
	return admin, sas
}

// stores returns the rig's payload container in both accounts.
func (r *sasRig) stores(t *testing.T) (admin, sas *PayloadStore) {
	t.Helper()
	admin, err := r.admin.PayloadStore(r.container)
	require.NoError(t, err)
	sas, err = r.sas.PayloadStore(r.container)
	require.NoError(t, err)
	return admin, sas
}

// blob writes a payload blob with the account key and returns its pointer.
func (r *sasRig) blob(ctx context.Context, t *testing.T) *wire.Pointer {
	t.Helper()
	admin, _ := r.stores(t)
	p, err := admin.put(ctx, payload.Meta{Kind: payload.KindSingle, Queue: "q", Created: time.Now(), Items: 1}, []byte("payload"))
	require.NoError(t, err)
	return p
}

// received sends a message with the account key, receives it, and returns
// the delivery as the SAS account's queue would have it.
func received(ctx context.Context, t *testing.T, admin, sas *Queue) *Delivery {
	t.Helper()
	_, err := admin.Send(ctx, "m", nil)
	require.NoError(t, err)
	ds, err := admin.Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	d := ds[0]
	d.Receipt = &popReceipt{queue: sas, value: d.Receipt.(*popReceipt).value}
	return d
}

var listenerOps = []sasOp{
	{name: "receive", needs: []need{{'q', 'o', 'p'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		admin, sas := r.queues(t)
		_, err := admin.Send(ctx, "m", nil)
		require.NoError(t, err)
		_, err = sas.Receive(ctx, 1, time.Minute)
		return err
	}},
	{name: "release or renew", needs: []need{{'q', 'o', 'u'}}, azurite: []need{{'q', 'c', 'u'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		admin, sas := r.queues(t)
		return sas.SetVisibility(ctx, received(ctx, t, admin, sas), 0)
	}},
	{name: "delete", needs: []need{{'q', 'o', 'p'}}, azurite: []need{{'q', 'c', 'p'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		admin, sas := r.queues(t)
		return sas.Delete(ctx, received(ctx, t, admin, sas))
	}},
	{name: "depth", needs: []need{{'q', 'c', 'r'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		admin, sas := r.queues(t)
		require.NoError(t, admin.Create(ctx))
		_, err := sas.Depth(ctx)
		return err
	}},
	{name: "send to the poison queue", needs: []need{{'q', 'o', 'a'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		admin, sas := r.queues(t)
		require.NoError(t, admin.poisonQueue().Create(ctx))
		_, err := sas.poisonQueue().Send(ctx, "envelope", nil)
		return err
	}},
	{name: "create the poison queue", needs: []need{{'q', 'o', 'a'}, {'q', 'c', 'c'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		_, sas := r.queues(t)
		_, err := sas.poisonQueue().Send(ctx, "envelope", nil)
		return err
	}},
	{name: "read a payload", needs: []need{{'b', 'o', 'r'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		p := r.blob(ctx, t)
		_, sas := r.stores(t)
		_, err := sas.fetch(ctx, p)
		return err
	}},
	{name: "write a payload's metadata", needs: []need{{'b', 'o', 'r'}, {'b', 'o', 'w'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		p := r.blob(ctx, t)
		_, sas := r.stores(t)
		return sas.markPoisoned(ctx, p.Blob, time.Now())
	}},
	{name: "delete a payload", needs: []need{{'b', 'o', 'd'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		p := r.blob(ctx, t)
		_, sas := r.stores(t)
		return sas.remove(ctx, p.Blob)
	}},
}

var publisherOps = []sasOp{
	{name: "send", needs: []need{{'q', 'o', 'a'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		admin, sas := r.queues(t)
		require.NoError(t, admin.Create(ctx))
		_, err := sas.Send(ctx, "m", nil)
		return err
	}},
	{name: "send creating the queue", needs: []need{{'q', 'o', 'a'}, {'q', 'c', 'c'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		_, sas := r.queues(t)
		_, err := sas.Send(ctx, "m", nil)
		return err
	}},
	{name: "offload", needs: []need{{'b', 'o', 'c'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		r.blob(ctx, t) // the container now exists
		_, sas := r.stores(t)
		_, err := sas.put(ctx, payload.Meta{Kind: payload.KindSingle, Queue: "q", Created: time.Now(), Items: 1}, []byte("payload"))
		return err
	}},
	{name: "offload creating the container", needs: []need{{'b', 'o', 'c'}, {'b', 'c', 'c'}}, run: func(ctx context.Context, t *testing.T, r *sasRig) error {
		sas, err := r.sas.PayloadStore(uniqueName(t)) // not the rig's, which the others create
		require.NoError(t, err)
		_, err = sas.put(ctx, payload.Meta{Kind: payload.KindSingle, Queue: "q", Created: time.Now(), Items: 1}, []byte("payload"))
		return err
	}},
}

// With its least privilege each role's every operation succeeds; with any
// one permission, resource type or service taken away, exactly the
// operations that need it fail, with a 403 whose message names what is
// missing.
func TestPermissionsEachOneIsNeeded(t *testing.T) {
	t.Parallel()
	needStorage(t)
	for _, role := range []struct {
		name   string
		grants roleGrants
		ops    []sasOp
	}{
		{"publisher", publisherGrants, publisherOps},
		{"listener", listenerGrants, listenerOps},
	} {
		t.Run(role.name, func(t *testing.T) {
			t.Parallel()
			t.Run("least privilege", func(t *testing.T) {
				t.Parallel()
				r := newSASRig(t, role.grants, nil)
				for _, o := range role.ops {
					assert.NoError(t, o.run(t.Context(), t, r), o.name)
				}
			})
			for _, rm := range role.grants.removals() {
				t.Run(rm.String(), func(t *testing.T) {
					t.Parallel()
					r := newSASRig(t, role.grants, &rm)
					code, says := rm.refusal()
					for _, o := range role.ops {
						err := o.run(t.Context(), t, r)
						service, azurite := anyHit(rm, o.needs), anyHit(rm, o.needs)
						if o.azurite != nil {
							azurite = anyHit(rm, o.azurite)
						}
						switch {
						case service && azurite:
							if assert.Error(t, err, "%s should need what was removed", o.name) {
								assertRefused(t, err, code, says, o.name)
							}
						case (service || azurite) && err != nil:
							assertRefused(t, err, code, says, o.name)
						case service || azurite:
							t.Logf("%s: not refused here, though %s", o.name, map[bool]string{true: "the service documents it", false: "Azurite asks for it"}[service])
						default:
							assert.NoError(t, err, "%s should not need what was removed", o.name)
						}
					}
				})
			}
		})
	}
}

func anyHit(rm removal, needs []need) bool {
	for _, n := range needs {
		if rm.hits(n) {
			return true
		}
	}
	return false
}

// assertRefused checks that err is a 403 StorageError with code whose
// message says what is missing.
func assertRefused(t *testing.T, err error, code, says, op string) {
	t.Helper()
	var se *StorageError
	if !assert.ErrorAs(t, err, &se, op) {
		return
	}
	assert.Equal(t, 403, se.StatusCode, "%s: %v", op, err)
	assert.Equal(t, code, se.Code, "%s: %v", op, err)
	assert.Contains(t, err.Error(), says, op)
}
