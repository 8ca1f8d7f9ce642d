package mgmt

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sort"
	"time"
)

// Check reports whether one dependency is usable; nil means ready.
type Check func(ctx context.Context) error

// Handler returns the management HTTP handler. checks are run, each with a
// short timeout, on every /readyz request.
func Handler(checks map[string]Check, extra map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "UP"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		names := make([]string, 0, len(checks))
		for n := range checks {
			names = append(names, n)
		}
		sort.Strings(names)
		status, code := "UP", http.StatusOK
		results := make(map[string]string, len(checks))
		for _, n := range names {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			err := checks[n](ctx)
			cancel()
			if err != nil {
				status, code = "DOWN", http.StatusServiceUnavailable
				results[n] = err.Error()
				continue
			}
			results[n] = "UP"
		}
		writeJSON(w, code, map[string]any{"status": status, "checks": results})
	})
	for path, h := range extra {
		mux.Handle(path, h)
	}
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Serve listens on addr and serves h until ctx is done. It returns once the
// listener is bound (or failed), so start-up errors surface at once.
func Serve(ctx context.Context, addr string, h http.Handler) (bound string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() { _ = srv.Serve(ln) }() // returns ErrServerClosed on shutdown
	return ln.Addr().String(), nil
}
