package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/gantry-ci/gantry/internal/store"
)

// claimGroups gathers concurrent claims that search for the same jobs, so one write
// serves them all (see Engine.Claim).
type claimGroups struct {
	mu   sync.Mutex
	open map[string]*claimGroup
}

// claimGroup is the claims one write serves. It takes members until the write starts.
type claimGroup struct {
	gs      *claimGroups
	key     string
	mu      sync.Mutex
	members []*claimMember
	max     int // the members' Max, summed
}

// maxGroupJobs bounds the jobs one group's statement may assign, and so its parameters.
const maxGroupJobs = 512

// claimMember is one waiting claim and, once its group's write has committed, its answer.
type claimMember struct {
	ctx    context.Context
	p      store.ClaimParams
	claims []*store.Claim
	err    error
	done   chan struct{}
}

// claimKey names what a claim searches for and the terms of the leases it writes: claims
// with the same key can share one search and one assigning statement.
func claimKey(p store.ClaimParams) string {
	labels := slices.Clone(p.Labels)
	slices.Sort(labels)
	projects := slices.Clone(p.Projects)
	slices.Sort(projects)
	return fmt.Sprintf("%q %d %d %q %d %d %t", labels, p.FreeMilliCPU, p.FreeMemory, projects,
		p.LeaseTTL, p.TimeoutGrace, p.Start)
}

// join adds m to the open group for its key, or opens one; leader reports that m opened
// it, and must then run the group's write and finish it.
func (gs *claimGroups) join(m *claimMember) (g *claimGroup, leader bool) {
	key := claimKey(m.p)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.open[key]; g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.max+m.p.Max <= maxGroupJobs {
			g.members = append(g.members, m)
			g.max += m.p.Max
			return g, false
		}
		// Full: m opens the next group, and this one takes no more.
	}
	if gs.open == nil {
		gs.open = map[string]*claimGroup{}
	}
	g = &claimGroup{gs: gs, key: key, members: []*claimMember{m}, max: m.p.Max}
	gs.open[key] = g
	return g, true
}

// take closes the group to newcomers and returns its members; it returns the same members
// when the write runs again.
func (g *claimGroup) take() []*claimMember {
	g.gs.mu.Lock()
	if g.gs.open[g.key] == g {
		delete(g.gs.open, g.key)
	}
	g.gs.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.members
}

// claims returns every claim the group's write made.
func (g *claimGroup) claims() []*store.Claim {
	var out []*store.Claim
	for _, m := range g.take() {
		out = append(out, m.claims...)
	}
	return out
}

// finish hands each member its answer once the group's write is over. A write that
// failed made no claims, and fails every member; when the claims' runs or specs could
// not be read, each member gets its claims with the error, to hand them back.
func (g *claimGroup) finish(writeErr, loadErr error) {
	for _, m := range g.take() {
		switch {
		case writeErr != nil:
			m.claims, m.err = nil, writeErr
		case loadErr != nil:
			m.err = loadErr
		}
		close(m.done)
	}
}
