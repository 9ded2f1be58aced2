package forge

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// verifyHMAC checks a hex HMAC-SHA256 of body, optionally behind prefix ("sha256=").
func verifyHMAC(provider, header, sig, prefix string, body, secret []byte) error {
	if len(secret) == 0 {
		// An empty key is a key anyone can sign with: refuse rather than accept the world.
		return &SignatureError{provider, "no webhook secret is configured"}
	}
	if sig == "" {
		return &SignatureError{provider, "no " + header + " header"}
	}
	hexSig, ok := strings.CutPrefix(sig, prefix)
	if !ok {
		return &SignatureError{provider, fmt.Sprintf("%s does not start with %q", header, prefix)}
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return &SignatureError{provider, header + " is not a hex SHA-256 HMAC"}
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return &SignatureError{provider, header + " does not match the body"}
	}
	return nil
}

// equalSecret compares a shared token in constant time. Both sides are hashed first because
// subtle.ConstantTimeCompare returns early on a length mismatch, which would leak the
// secret's length.
func equalSecret(got string, secret []byte) bool {
	a := sha256.Sum256([]byte(got))
	b := sha256.Sum256(secret)
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// validSHA accepts a full SHA-1 or SHA-256 object id, lower-case hex as forges send them.
// Anything else is refused so nothing odd ever reaches a git command line.
func validSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// zeroSHA reports whether s is the all-zero id forges use for "no commit" (a ref created or
// deleted).
func zeroSHA(s string) bool {
	return (len(s) == 40 || len(s) == 64) && strings.Trim(s, "0") == ""
}

// validRefName refuses names git would refuse too, and anything that could be taken for an
// option or escape the refs namespace.
func validRefName(s string) bool {
	if s == "" || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") ||
		strings.HasSuffix(s, ".lock") || strings.Contains(s, "..") || strings.Contains(s, "//") ||
		strings.Contains(s, "@{") {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	return true
}

// setRef fills Ref, Branch or Tag and Kind from a full ref name.
func (e *Event) setRef(ref string) error {
	if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok && validRefName(b) {
		e.Ref, e.Branch, e.Kind = ref, b, KindPush
		return nil
	}
	if t, ok := strings.CutPrefix(ref, "refs/tags/"); ok && validRefName(t) {
		e.Ref, e.Tag, e.Kind = ref, t, KindTag
		return nil
	}
	return fmt.Errorf("ref %q is not refs/heads/<branch> or refs/tags/<tag>", ref)
}

// setPush fills the commit fields of a push from the forge's before and after ids.
func (e *Event) setPush(before, after string) error {
	switch {
	case zeroSHA(after):
		e.Deleted = true
	case validSHA(after):
		e.SHA = after
	default:
		return fmt.Errorf("after %q is not a commit id", after)
	}
	switch {
	case before == "" || zeroSHA(before):
		// A new ref: its commits are not all listed, so its paths must be diffed.
		if !e.Deleted {
			e.ChangedPathsIncomplete = true
		}
	case validSHA(before):
		e.Before = before
	default:
		return fmt.Errorf("before %q is not a commit id", before)
	}
	return nil
}

// peelTag replaces a tag push's sha with the commit the forge says the tag points at: an
// annotated tag's push names the tag object, which no status API accepts and which is not
// what a run builds. Branch pushes always name a commit and are left alone.
func (e *Event) peelTag(commit string) {
	if e.Kind == KindTag && !e.Deleted && validSHA(commit) {
		e.SHA = commit
	}
}

// setPullRequest fills a pull request event from what GitHub and Gitea both send, refusing a
// number, head commit or base branch that could not be built or reported on. An empty base
// repository is the event's own; a head repository that differs from the base (or is gone)
// is a fork's.
func (e *Event) setPullRequest(action string, number int, title string, merged bool, head, base PRBranch) error {
	if number <= 0 {
		return fmt.Errorf("pull request number %d", number)
	}
	if !validSHA(head.SHA) {
		return fmt.Errorf("head sha %q is not a commit id", head.SHA)
	}
	if !validRefName(base.Ref) {
		return fmt.Errorf("base ref %q is not a branch name", base.Ref)
	}
	e.Kind, e.Action = KindPullRequest, action
	e.Ref = fmt.Sprintf("refs/pull/%d/head", number)
	e.SHA = head.SHA
	e.Branch = base.Ref
	if base.Repository.FullName == "" {
		base.Repository = e.Repository
	}
	e.PullRequest = &PullRequest{
		Number: number,
		Title:  title,
		Head:   head,
		Base:   base,
		// A head repository that is gone was a fork: the base repository cannot vanish
		// while its pull request is delivered.
		Fork:   !strings.EqualFold(head.Repository.FullName, base.Repository.FullName),
		Merged: merged,
	}
	e.ChangedPathsIncomplete = true
	return nil
}

// actor is the login of the first of users a payload names (GitHub and Gitea say who
// pushed as sender or pusher).
func actor(users ...*ghUser) string {
	for _, u := range users {
		if u != nil && u.Login != "" {
			return u.Login
		}
	}
	return ""
}

// pathUnion merges the added, modified and removed lists of every commit, sorted, once each.
func pathUnion(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// decode unmarshals body into v, wrapping failures as a PayloadError.
func decode(provider, event string, body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return &PayloadError{provider, event, err}
	}
	return nil
}

// userAgent names Gantry to forges; GitHub refuses API calls without one.
const userAgent = "Gantry"

// maxErrorBody bounds how much of a refusal is kept for the error message, which the
// outbox records.
const maxErrorBody = 1 << 10

// reportStatus is the status call GitHub, GitLab and Gitea share, so the three check a status
// in the same order and word their refusals alike: the status itself, then the repository's
// shape (repoPath answers false when the forge cannot address it), then the token, then the
// URL. body is the forge's own words for s; target_url is added only when there is one,
// because the forges refuse an empty link.
func reportStatus(ctx context.Context, cfg Config, provider string, s Status, repoPath func(string) (string, bool), header http.Header, body map[string]string) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("report %s commit status: %w", provider, err)
	}
	p, ok := repoPath(s.Repository)
	if !ok {
		return fmt.Errorf("report %s commit status: repository %q is not owner/name", provider, s.Repository)
	}
	if err := requireToken(provider, cfg); err != nil {
		return err
	}
	u, err := joinURL(cfg.BaseURL, p+"/statuses/"+s.SHA)
	if err != nil {
		return fmt.Errorf("report %s commit status: %w", provider, err)
	}
	if s.TargetURL != "" {
		body["target_url"] = s.TargetURL
	}
	return postStatus(ctx, cfg, provider, u, header, body)
}

// ownerRepoPath addresses a repository as GitHub and Gitea do, prefix+"/repos/{owner}/{name}",
// and refuses any other shape rather than let a slash change which API is called.
func ownerRepoPath(prefix string) func(string) (string, bool) {
	return func(repository string) (string, bool) {
		owner, repo, ok := strings.Cut(repository, "/")
		if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
			return "", false
		}
		return prefix + "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo), true
	}
}

// postStatus POSTs a JSON status and turns anything but a 2xx into a *StatusError.
func postStatus(ctx context.Context, cfg Config, provider, url string, header http.Header, body any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode %s commit status: %w", provider, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("build %s commit status request: %w", provider, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := cfg.client().Do(req)
	if err != nil {
		// No answer: the forge may be down or the network away; the same call may work later,
		// unless it is our own caller that gave up.
		return &StatusError{Provider: provider, Retryable: ctx.Err() == nil, Message: err.Error(), Err: err}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// Drain a little more so the connection can be reused, but never read without bound.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	se := &StatusError{
		Provider:   provider,
		StatusCode: resp.StatusCode,
		Message:    strings.TrimSpace(string(msg)),
	}
	now := cfg.clock().Now()
	se.RetryAfter = retryAfter(resp.Header, now)
	switch {
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode == http.StatusRequestTimeout:
		se.Retryable = true
	case resp.StatusCode == http.StatusForbidden &&
		(resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-RateLimit-Remaining") == "0"):
		// GitHub answers rate limits with 403 and says so only in these headers.
		se.Retryable = true
		if se.RetryAfter == 0 {
			se.RetryAfter = rateLimitReset(resp.Header, now)
		}
	}
	if resp.StatusCode/100 == 3 {
		// Not followed (the client should follow none): the status and token would go
		// where the project's settings do not say.
		se.Message = "redirects are not followed; set the API base URL to where it redirects"
	}
	if !se.Retryable {
		se.RetryAfter = 0
	}
	return se
}

// retryAfter reads Retry-After as delay-seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		// Bounded so a hostile value cannot overflow into a negative wait.
		return time.Duration(min(n, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), 24*time.Hour)
	}
	return 0
}

// rateLimitReset reads GitHub's X-RateLimit-Reset (Unix seconds).
func rateLimitReset(h http.Header, now time.Time) time.Duration {
	n, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		return 0
	}
	if d := time.Unix(n, 0).Sub(now); d > 0 {
		return min(d, 24*time.Hour)
	}
	return 0
}

// requireToken refuses to call a forge without credentials: the answer could only be 401.
func requireToken(provider string, cfg Config) error {
	if cfg.Token == "" {
		return &StatusError{Provider: provider, Message: "no API token is configured"}
	}
	return nil
}

// joinURL appends path to base without doubling or dropping the slash between them.
func joinURL(base, path string) (string, error) {
	if base == "" {
		return "", errors.New("no API base URL is configured")
	}
	return strings.TrimRight(base, "/") + path, nil
}
