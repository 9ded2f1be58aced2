package cli

import (
	"net/http"

	"github.com/gantry-ci/gantry/internal/web"
)

// dashboard is the web UI the coordinator serves.
func dashboard() http.Handler { return web.Handler() }
