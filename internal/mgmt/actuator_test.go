package mgmt

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestActuator_HealthPathsAnswerAsSpringBootDoes(t *testing.T) {
	var down error
	h := Handler(map[string]Check{"redis": func(context.Context) error { return down }}, nil)
	get := func(path string) (int, string, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, strings.TrimSpace(rec.Body.String()), rec.Header().Get("Content-Type")
	}
	cases := []struct {
		path     string
		redisUp  bool
		wantCode int
		wantBody string
	}{
		{"/actuator/health", true, 200, `{"groups":["liveness","readiness"],"status":"UP"}`},
		{"/actuator/health/readiness", true, 200, `{"status":"UP"}`},
		{"/actuator/health/liveness", true, 200, `{"status":"UP"}`},
		{"/actuator/health", false, 503, `{"groups":["liveness","readiness"],"status":"DOWN"}`},
		{"/actuator/health/readiness", false, 503, `{"status":"DOWN"}`},
		// Liveness never depends on a dependency: a restart would not fix Redis.
		{"/actuator/health/liveness", false, 200, `{"status":"UP"}`},
	}
	for _, c := range cases {
		down = nil
		if !c.redisUp {
			down = errors.New("connection refused")
		}
		code, body, ctype := get(c.path)
		if code != c.wantCode || body != c.wantBody || ctype != actuatorJSON {
			t.Errorf("%s (redis up %v) = %d %s (%s), want %d %s", c.path, c.redisUp, code, body, ctype, c.wantCode, c.wantBody)
		}
	}
}
