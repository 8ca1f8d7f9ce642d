package mgmt

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"time"
)

// checkBudget bounds a whole /readyz request.
const checkBudget = 800 * time.Millisecond

// Check reports whether one dependency is usable; nil means ready. It must
// return when ctx is done.
type Check func(ctx context.Context) error

// Handler returns the management HTTP handler. checks are run, each with a
// short timeout, on every /readyz request.
func Handler(checks map[string]Check, extra map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "UP"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		status, code, out := runChecks(r.Context(), checks)
		writeJSON(w, code, map[string]any{"status": status, "checks": out})
	})
	actuator(mux, checks)
	for path, h := range extra {
		mux.Handle(path, h)
	}
	return mux
}

// runChecks runs every check at once under one budget below the 1 s probe
// timeout orchestrators default to, so a dependency that hangs gives a 503
// naming it rather than a probe timeout. It returns UP and 200 when all
// passed, DOWN and 503 otherwise, and each check's result.
func runChecks(ctx context.Context, checks map[string]Check) (string, int, map[string]string) {
	ctx, cancel := context.WithTimeout(ctx, checkBudget)
	defer cancel()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(checks))
	for name, check := range checks {
		go func() { results <- result{name, check(ctx)} }()
	}
	status, code := "UP", http.StatusOK
	out := make(map[string]string, len(checks))
	for name := range checks {
		out[name] = "no answer within " + checkBudget.String()
	}
collect:
	for range checks {
		select {
		case res := <-results:
			out[res.name] = "UP"
			if res.err != nil {
				out[res.name] = res.err.Error()
			}
		case <-ctx.Done():
			break collect // a check ignoring its context is reported, not waited for
		}
	}
	for _, v := range out {
		if v != "UP" {
			status, code = "DOWN", http.StatusServiceUnavailable
		}
	}
	return status, code, out
}

func writeJSON(w http.ResponseWriter, code int, v any) { writeJSONAs(w, "application/json", code, v) }

func writeJSONAs(w http.ResponseWriter, contentType string, code int, v any) {
	w.Header().Set("Content-Type", contentType)
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
