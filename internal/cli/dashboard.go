package cli

import "net/http"

// dashboard is the web UI the coordinator serves; nil until the dashboard lands.
func dashboard() http.Handler { return nil }
