package mgmt

import "net/http"

// actuatorJSON is the media type Spring Boot's actuator answers with.
const actuatorJSON = "application/vnd.spring-boot.actuator.v3+json"

// actuator serves the health paths of the reference service (Spring Boot
// actuator, upstream 0.1.25.18+), so probes and monitors written for it
// keep working: /actuator/health and /actuator/health/readiness run the
// readiness checks and answer {"status":"UP"} (200) or {"status":"DOWN"}
// (503); /actuator/health/liveness answers UP while the process serves.
// Like Spring Boot's default (show-details never) they name no component;
// /readyz has the details.
func actuator(mux *http.ServeMux, checks map[string]Check) {
	mux.HandleFunc("GET /actuator/health", func(w http.ResponseWriter, r *http.Request) {
		status, code, _ := runChecks(r.Context(), checks)
		writeActuator(w, code, map[string]any{"status": status, "groups": []string{"liveness", "readiness"}})
	})
	mux.HandleFunc("GET /actuator/health/readiness", func(w http.ResponseWriter, r *http.Request) {
		status, code, _ := runChecks(r.Context(), checks)
		writeActuator(w, code, map[string]any{"status": status})
	})
	mux.HandleFunc("GET /actuator/health/liveness", func(w http.ResponseWriter, r *http.Request) {
		writeActuator(w, http.StatusOK, map[string]any{"status": "UP"})
	})
}

func writeActuator(w http.ResponseWriter, code int, v any) { writeJSONAs(w, actuatorJSON, code, v) }
