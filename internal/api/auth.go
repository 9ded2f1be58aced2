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

	"github.com/gantry-ci/gantry/internal/store"
)

// access is who may call a route.
type access []store.Role

var (
	public      access // no credentials needed
	readers     = access{store.RoleRead, store.RoleWrite, store.RoleAdmin}
	writers     = access{store.RoleWrite, store.RoleAdmin}
	registrars  = access{store.RoleRegister, store.RoleAdmin}
	agentAccess = access{store.RoleAgent}
)

// tokenPrefix marks Gantry secrets, so that secret scanners and people recognise them.
const tokenPrefix = "gtk_"

// IssueToken creates a token with the given role and returns its secret, which is shown
// once: the store keeps only its SHA-256 hash.
func IssueToken(ctx context.Context, st store.Tokens, name string, role store.Role, workerID string) (string, error) {
	switch role {
	case store.RoleAdmin, store.RoleWrite, store.RoleRead, store.RoleRegister, store.RoleAgent:
	default:
		return "", fmt.Errorf("unknown role %q: want admin, write, read, register or agent", role)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	secret := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	if err := st.CreateToken(ctx, &store.Token{Name: name, Role: role, Hash: hashToken(secret), WorkerID: workerID}); err != nil {
		return "", fmt.Errorf("store token: %w", err)
	}
	return secret, nil
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
// whose role may not call the route. With auth off every request passes.
func (s *Server) guard(who access, h http.HandlerFunc) http.HandlerFunc {
	if who == nil || !s.auth {
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
		if !slices.Contains(who, tk.Role) {
			writeError(w, http.StatusForbidden, codeForbidden, fmt.Sprintf("a %s token may not do this", tk.Role), nil)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tk)))
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
