package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// tokenPrefix marks Gantry secrets, so that secret scanners and people recognise them.
const tokenPrefix = "gtk_"

// IssueToken creates a token with the given role and returns its secret, which is shown
// once: the store keeps only its SHA-256 hash.
func IssueToken(ctx context.Context, st store.Tokens, name string, role store.Role, workerID string) (string, error) {
	return IssueScopedToken(ctx, st, &store.Token{Name: name, Role: role, WorkerID: workerID})
}

// IssueScopedToken creates the token tk describes (name, role, scope, expiry, parent),
// fills in its id and returns its secret, which is shown once: the store keeps only its
// SHA-256 hash. Only register tokens and worker credentials carry a scope.
func IssueScopedToken(ctx context.Context, st store.Tokens, tk *store.Token) (string, error) {
	switch tk.Role {
	case store.RoleAdmin, store.RoleMaintainer, store.RoleDeveloper, store.RoleViewer, store.RoleWrite, store.RoleRead,
		store.RoleRegister, store.RoleAgent:
	default:
		return "", fmt.Errorf("unknown role %q: want admin, maintainer, developer, viewer, write, read, register or agent", tk.Role)
	}
	worker := tk.Role == store.RoleRegister || tk.Role == store.RoleAgent
	if len(tk.Labels) > 0 && !worker {
		return "", fmt.Errorf("a %s token cannot be scoped to labels: only register tokens are: %w", tk.Role, store.ErrInvalid)
	}
	if len(tk.Projects) > 0 && tk.Role == store.RoleAdmin {
		return "", fmt.Errorf("an admin token is the server's and cannot be scoped to projects; give maintainer for a project's: %w", store.ErrInvalid)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	secret := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	tk.Hash = hashToken(secret)
	if err := st.CreateToken(ctx, tk); err != nil {
		return "", fmt.Errorf("store token: %w", err)
	}
	return secret, nil
}

// LookupToken finds the token a secret is, as a request bearing it would be
// authenticated; store.ErrNotFound when it is none. Whether it is still valid is
// Token.Valid's to say.
func LookupToken(ctx context.Context, st store.Tokens, secret string) (*store.Token, error) {
	return st.LookupToken(ctx, hashToken(strings.TrimSpace(secret)))
}

func hashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

type tokenKey struct{}

// tokenFrom returns the token that authenticated the request; nil when auth is off.
func tokenFrom(ctx context.Context) *store.Token {
	t, _ := ctx.Value(tokenKey{}).(*store.Token)
	return t
}

// guard wraps a handler with the access check: 401 without a valid token, 403 with one
// whose role may not call the route, 404 (as for a missing thing) when the route's thing
// belongs to a project the token has no role on. With auth off every request passes.
// Nothing about a token is cached: every request reads it, so a revocation holds from
// the next request on, on every replica.
func (s *Server) guard(who access, h http.HandlerFunc) http.HandlerFunc {
	if who.kind == accessPublic || !s.auth {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		secret, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gantry"`)
			writeError(w, http.StatusUnauthorized, codeUnauthorized, "an Authorization: Bearer token is required", nil)
			return
		}
		tk, err := s.store.LookupToken(r.Context(), hashToken(strings.TrimSpace(secret)))
		if errors.Is(err, store.ErrNotFound) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gantry", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, codeUnauthorized, "the token is not valid", nil)
			return
		}
		if err != nil {
			s.storeError(w, r, "check token", err)
			return
		}
		now := s.clock.Now()
		if !tk.Valid(now) {
			msg := "the token has expired"
			if !tk.RevokedAt.IsZero() {
				msg = "the token was revoked"
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="gantry", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, codeUnauthorized, msg, nil)
			return
		}
		s.tokens.used(r.Context(), s, tk, now)
		ctx := context.WithValue(r.Context(), tokenKey{}, tk)
		ctx = context.WithValue(ctx, callerKey{}, &caller{tk: tk})
		r = r.WithContext(ctx)
		if !s.allowed(w, r, who, tk) {
			return
		}
		h(w, r)
	}
}

// bearerToken returns the token of an Authorization: Bearer header. The scheme is
// case-insensitive (RFC 9110, section 11.1), so "bearer x" is as good as "Bearer x".
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// sameWorker checks that an agent credential is used for its own worker.
func sameWorker(w http.ResponseWriter, r *http.Request, workerID string) bool {
	tk := tokenFrom(r.Context())
	if tk == nil || tk.WorkerID == workerID {
		return true
	}
	writeError(w, http.StatusForbidden, codeForbidden, "this credential belongs to another worker", nil)
	return false
}

// withinScope reports whether every label is one of the scope's; an empty scope allows any.
func withinScope(labels, scope []string) bool {
	if len(scope) == 0 {
		return true
	}
	for _, l := range labels {
		if !slices.Contains(scope, l) {
			return false
		}
	}
	return true
}

// labelsInScope checks that a worker declares only labels its credential allows, so that
// a token handed to the linux fleet cannot enroll a worker that takes the deploy jobs.
func labelsInScope(w http.ResponseWriter, r *http.Request, labels []string) bool {
	tk := tokenFrom(r.Context())
	if tk == nil || withinScope(labels, tk.Labels) {
		return true
	}
	writeError(w, http.StatusForbidden, codeForbidden,
		fmt.Sprintf("labels %q are not all within this token's labels %q", labels, tk.Labels), nil)
	return false
}

// tokenUseEvery is how often at most a token's last use is written: often enough to tell
// a token in use from a forgotten one, and far from a write per request.
const tokenUseEvery = time.Minute

// maxRemembered bounds each map of tokenState; past it the map starts over, which costs
// a few extra store calls and nothing else.
const maxRemembered = 100_000

// tokenState is what a server remembers of tokens to spare the store work. All of it can
// be lost in a restart: it is rebuilt from the store on the next requests.
type tokenState struct {
	mu sync.Mutex
	// lastUse is when each token's use was last written from here.
	lastUse map[uuid.UUID]time.Time
	// owners maps a lease token to the worker it was handed to. A lease token is issued
	// to one worker once and never reused, so an entry never goes stale.
	owners map[string]string
}

// used records a token's use at now, at most once per tokenUseEvery per token.
func (ts *tokenState) used(ctx context.Context, s *Server, tk *store.Token, now time.Time) {
	if now.Sub(tk.LastUsedAt) < tokenUseEvery {
		return
	}
	ts.mu.Lock()
	if ts.lastUse == nil || len(ts.lastUse) >= maxRemembered {
		ts.lastUse = map[uuid.UUID]time.Time{}
	}
	due := now.Sub(ts.lastUse[tk.ID]) >= tokenUseEvery
	if due {
		ts.lastUse[tk.ID] = now
	}
	ts.mu.Unlock()
	if !due {
		return
	}
	if err := s.store.TouchToken(ctx, tk.ID, now); err != nil {
		s.log.WarnContext(ctx, "record token use", "token", tk.ID, "err", err)
	}
}

func (ts *tokenState) owner(lease string) (string, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	w, ok := ts.owners[lease]
	return w, ok
}

func (ts *tokenState) setOwner(lease, worker string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.owners == nil || len(ts.owners) >= maxRemembered {
		ts.owners = map[string]string{}
	}
	ts.owners[lease] = worker
}

// holdsLease checks that the worker whose credential made the request is the one its
// lease was handed to. A lease token alone is not enough: a worker that learned another
// worker's lease token (from a log, a step, a proxy) must not write that worker's job.
// A token that is not the job's lease at all is left to the store, which answers 409.
// With auth off there are no credentials and job-scoped calls name no worker: nothing
// to check.
func (s *Server) holdsLease(w http.ResponseWriter, r *http.Request, ref store.LeaseRef) bool {
	tk := tokenFrom(r.Context())
	if tk == nil {
		return true
	}
	owner, ok := s.tokens.owner(ref.Token)
	if !ok {
		job, err := s.store.GetJob(r.Context(), ref.JobID)
		if errors.Is(err, store.ErrNotFound) {
			return true
		}
		if err != nil {
			s.storeError(w, r, "check lease holder", err)
			return false
		}
		if job.LeaseToken != ref.Token || job.WorkerID == "" {
			return true
		}
		owner = job.WorkerID
		s.tokens.setOwner(ref.Token, owner)
	}
	if owner != tk.WorkerID {
		writeError(w, http.StatusForbidden, codeForbidden, "this lease belongs to another worker", nil)
		return false
	}
	return true
}
