package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReadyz_IsUnavailableWhileAnyCheckFailsAndNamesIt(t *testing.T) {
	failing := true
	h := Handler(map[string]Check{
		"redis": func(context.Context) error {
			if failing {
				return errors.New("connection refused")
			}
			return nil
		},
		"jetstream": func(context.Context) error { return nil },
	}, nil)
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d while a dependency is down; liveness must not depend on it", code)
	}
	code, body := get("/readyz")
	checks, _ := body["checks"].(map[string]any)
	if code != http.StatusServiceUnavailable || body["status"] != "DOWN" || checks["redis"] != "connection refused" || checks["jetstream"] != "UP" {
		t.Errorf("/readyz = %d %v", code, body)
	}
	failing = false
	if code, body := get("/readyz"); code != http.StatusOK || body["status"] != "UP" {
		t.Errorf("/readyz after recovery = %d %v", code, body)
	}
}

func TestReadyz_AnswersWithinItsBudgetWhenACheckHangs(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	h := Handler(map[string]Check{
		"hangs": func(context.Context) error { <-block; return nil }, // ignores its context
		"fine":  func(context.Context) error { return nil },
	}, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	checks, _ := body["checks"].(map[string]any)
	if rec.Code != http.StatusServiceUnavailable || checks["fine"] != "UP" || checks["hangs"] == "UP" {
		t.Errorf("/readyz = %d %v; want 503 naming the check that did not answer", rec.Code, body)
	}
}
