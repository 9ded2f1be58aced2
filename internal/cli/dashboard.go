package cli

import (
	"net/http"

	"github.com/gantry-ci/gantry/internal/web"
)

// dashboard is the web UI the coordinator serves.
func dashboard() http.Handler { return web.Handler() }

// dashboardOff answers the dashboard's paths of a server started with
// --dashboard=false: a 404 in the API's error format that says why, so that whoever
// opens the page learns the dashboard is off rather than missing.
func dashboardOff() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"the dashboard is off on this server ` +
			`(gantry server --dashboard=false, or GANTRY_DASHBOARD=false); the API is under /api/v1/","details":[]}}` + "\n"))
	})
}
