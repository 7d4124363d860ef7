package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A service mounts the dashboard under a prefix of its own, behind its own
// authentication, with actions for operators only. (An *azdispatch.Queue
// of an Account is given the same way; memqueue keeps the example
// self-contained.)
func Example() {
	orders := memqueue.New("orders", nil) // account.Queue("orders") in a service
	_, _ = orders.Send(context.Background(), `{"id":42}`, nil)

	isOperator := func(r *http.Request) bool { return r.Header.Get("X-Role") == "operator" } // your auth here
	h, err := dashboard.New(&dashboard.Options{
		Sources:  []azdispatch.Source{orders},
		Write:    true,
		ReadOnly: func(r *http.Request) bool { return !isOperator(r) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	// A listener running in the service shows its live state:
	// h.Register("orders", listener)
	h.Register("orders", dashboard.StateFunc(func() azdispatch.State { return azdispatch.State{Succeeded: 7} }))

	authenticated := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Role") == "" { // your session check here
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/azdispatch/", authenticated(http.StripPrefix("/ops/azdispatch", h)))

	for _, role := range []string{"", "viewer", "operator"} {
		req := httptest.NewRequest(http.MethodGet, "/ops/azdispatch/", nil)
		req.Header.Set("X-Role", role)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		body := rec.Body.String()
		fmt.Printf("%-8q %d depth shown: %v, actions: %v\n", role, rec.Code,
			strings.Contains(body, `<td class="num depth">1</td>`), strings.Contains(body, `action="act"`))
	}
	// Output:
	// ""       401 depth shown: false, actions: false
	// "viewer" 200 depth shown: true, actions: false
	// "operator" 200 depth shown: true, actions: true
}
