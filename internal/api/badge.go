package api

import (
	"fmt"
	"html"
	"net/http"
	"strings"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

func (s *Server) badgeRoutes(publicBadges bool) {
	// A badge is an image in a README that browsers fetch without a token: public only
	// when the operator says so (--public-badges); with auth off every route is.
	who := on(thingProject, store.RoleViewer)
	if publicBadges {
		who = public
	}
	s.handle("GET /api/v1/projects/{name}/badge.svg", who, s.badge)
}

// Badge states.
const (
	badgePassing   = "passing"
	badgeFailing   = "failing"
	badgeCancelled = "cancelled"
	badgeRunning   = "running"
	badgeUnknown   = "unknown"
)

var badgeColors = map[string]string{
	badgePassing: "#4c1", badgeFailing: "#e05d44", badgeCancelled: "#9f9f9f", badgeRunning: "#dfb317", badgeUnknown: "#9f9f9f",
}

// badgePages bounds how far back the badge looks for a finished run.
const badgePages = 4

// badge answers an SVG of the latest finished run of the project on ?branch= (the
// project's default branch when absent; any ref when it has none): passing, failing or
// cancelled; running when none has finished yet but one is under way; unknown when the
// branch has no run.
func (s *Server) badge(w http.ResponseWriter, r *http.Request) {
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	branch := r.URL.Query().Get("branch")
	if branch == "" {
		branch = p.DefaultBranch
	}
	ref := ""
	if branch != "" {
		ref = "refs/heads/" + branch
	}
	state := badgeUnknown
	before := uuid.Nil
pages:
	for range badgePages {
		runs, err := s.store.ListRuns(r.Context(), store.ListRunsParams{Project: p.Name, Ref: ref, Before: before, Limit: 100})
		if err != nil {
			s.storeError(w, r, "list runs", err)
			return
		}
		for _, run := range runs {
			switch run.Status {
			case store.RunSuccess:
				state = badgePassing
			case store.RunFailed:
				state = badgeFailing
			case store.RunCancelled:
				state = badgeCancelled
			default:
				state = badgeRunning
				continue
			}
			break pages
		}
		if len(runs) < 100 {
			break
		}
		before = runs[len(runs)-1].ID
	}
	w.Header().Set("Content-Type", "image/svg+xml; charset=utf-8")
	// Camo and browsers must ask again each time, or a README shows a stale result.
	w.Header().Set("Cache-Control", "no-cache, max-age=0")
	w.Header().Set("X-Gantry-Badge", state)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(badgeSVG("gantry", state)))
}

// badgeSVG draws a two-part flat badge; widths follow the text at about 7 px a glyph.
func badgeSVG(label, state string) string {
	lw, sw := 10+7*len(label), 10+7*len(state)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="20" role="img" aria-label="%s: %s">`,
		lw+sw, html.EscapeString(label), state)
	fmt.Fprintf(&b, `<title>%s: %s</title>`, html.EscapeString(label), state)
	fmt.Fprintf(&b, `<rect width="%d" height="20" fill="#555"/><rect x="%d" width="%d" height="20" fill="%s"/>`,
		lw, lw, sw, badgeColors[state])
	fmt.Fprintf(&b, `<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">`)
	fmt.Fprintf(&b, `<text x="%d" y="14">%s</text><text x="%d" y="14">%s</text></g></svg>`,
		lw/2, html.EscapeString(label), lw+sw/2, state)
	return b.String()
}
