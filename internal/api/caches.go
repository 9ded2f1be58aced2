package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// maxRestoreKeys bounds the prefixes one restore tries.
const maxRestoreKeys = 16

// cacheRoutes registers the cache routes: the worker's restore and save, under the job's
// lease, and the project's list and delete. Deleting an entry only makes a job build its
// cache again, so the project's developers may.
func (s *Server) cacheRoutes() {
	s.handle("POST /api/v1/agent/jobs/{id}/caches/restore", agentAccess, s.restoreCache)
	s.handle("POST /api/v1/agent/jobs/{id}/caches/save", agentAccess, s.saveCache)
	s.handle("POST /api/v1/agent/jobs/{id}/caches/commit", agentAccess, s.commitCache)
	s.handle("GET /api/v1/projects/{name}/caches", on(thingProject, store.RoleViewer), s.listCaches)
	s.handle("DELETE /api/v1/projects/{name}/caches", on(thingProject, store.RoleDeveloper), s.deleteCaches)
	s.handle("DELETE /api/v1/projects/{name}/caches/{id}", on(thingProject, store.RoleDeveloper), s.deleteCache)
}

type cacheJSON struct {
	ID         uuid.UUID `json:"id"`
	Project    string    `json:"project"`
	Scope      string    `json:"scope"`
	Key        string    `json:"key"`
	SHA256     string    `json:"sha256"`
	Size       int64     `json:"size"`
	CreatedAt  string    `json:"created_at"`
	LastUsedAt string    `json:"last_used_at"`
}

func newCacheJSON(project string, c *store.CacheEntry) cacheJSON {
	return cacheJSON{ID: c.ID, Project: project, Scope: c.Scope, Key: c.Key, SHA256: c.SHA256, Size: c.Size,
		CreatedAt: formatTime(c.CreatedAt), LastUsedAt: formatTime(c.LastUsedAt)}
}

// checkCacheKey says what is wrong with a key (or restore key) a worker sent, or "".
func checkCacheKey(k string) string {
	switch {
	case strings.TrimSpace(k) == "":
		return "is empty"
	case len(k) > pipeline.MaxCacheKey:
		return fmt.Sprintf("is longer than %d bytes", pipeline.MaxCacheKey)
	case !utf8.ValidString(k) || strings.ContainsFunc(k, unicode.IsControl):
		return "holds a control character or is not UTF-8"
	}
	return ""
}

// cacheJob is what a worker's cache call is about: the job's project, the scope its run
// saves caches in and those it reads them from, and the caches the job declares.
type cacheJob struct {
	project uuid.UUID
	write   string
	read    []string
	caches  []pipeline.Cache
	// anyKey is set for a job with steps that use actions: actions/cache, as a step or
	// inside a composite action, computes its keys when it runs (agent: nativeStep),
	// so no key is declared beforehand.
	anyKey bool
}

// cacheScopes checks that ref is the job's current lease and reads the project the job
// belongs to, the scopes its run saves its caches in and reads them from, and the
// caches its job declares.
func (s *Server) cacheScopes(w http.ResponseWriter, r *http.Request, ref store.LeaseRef) (cacheJob, bool) {
	if _, err := s.store.LeaseAttempt(r.Context(), ref); err != nil {
		s.agentError(w, r, "check lease", err)
		return cacheJob{}, false
	}
	job, err := s.store.GetJob(r.Context(), ref.JobID)
	if err != nil {
		s.agentError(w, r, "read job", err)
		return cacheJob{}, false
	}
	run, err := s.store.GetRun(r.Context(), job.RunID)
	if err != nil {
		s.storeError(w, r, "read run", err)
		return cacheJob{}, false
	}
	defaultBranch := ""
	if p, err := s.store.GetProjectByName(r.Context(), run.Project); err == nil {
		defaultBranch = p.DefaultBranch
	} else if !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, r, "read project", err)
		return cacheJob{}, false
	}
	c := cacheJob{project: job.ProjectID}
	c.write, c.read = store.CacheScopes(run.Trigger, defaultBranch)
	if job.Spec != nil {
		c.caches = job.Spec.Caches
		c.anyKey = slices.ContainsFunc(job.Spec.Steps, func(st pipeline.Step) bool { return st.Uses != "" })
	}
	return c, true
}

// declares answers 403 unless key is the key of one of the job's caches, as the worker
// computes it (pipeline.CacheKeyMatches), and each restore key one of that cache's
// restore keys, or the job has steps that use actions (anyKey). Only the shape is checked: what a hashFiles call stands for is
// computed over the workspace, which only the worker has.
func (c cacheJob) declares(w http.ResponseWriter, key string, restoreKeys []string) bool {
	if c.anyKey {
		return true
	}
	for _, spec := range c.caches {
		if !pipeline.CacheKeyMatches(spec.Key, key) {
			continue
		}
		ok := true
		for _, rk := range restoreKeys {
			if !slices.ContainsFunc(spec.RestoreKeys, func(planned string) bool { return pipeline.CacheKeyMatches(planned, rk) }) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	writeError(w, http.StatusForbidden, codeForbidden,
		fmt.Sprintf("cache key %q (restore keys %q) is none of those the job's caches declare", key, restoreKeys), nil)
	return false
}

// cachesOn answers a worker's cache call of a coordinator without a blob store: caches
// are off, which is no failure (200 {"state": "off"}), and nothing a retry would change.
func (s *Server) cachesOn(w http.ResponseWriter) bool {
	if s.blobs != nil {
		return true
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": "off", "entry": nil})
	return false
}

type restoreCacheRequest struct {
	Token       string   `json:"token"`
	Key         string   `json:"key"`
	RestoreKeys []string `json:"restore_keys"`
}

func (r *restoreCacheRequest) token() string { return r.Token }

// restoreCache answers the entry a job restores, with a pre-signed URL to download its
// archive, or {"entry": null} when none matches: the exact key in the run's own scope
// and then in the scopes it falls back to, else the newest entry a restore key is a
// prefix of.
func (s *Server) restoreCache(w http.ResponseWriter, r *http.Request) {
	var req restoreCacheRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok || !s.cachesOn(w) {
		return
	}
	var details []errorDetail
	if msg := checkCacheKey(req.Key); msg != "" {
		details = append(details, errorDetail{Path: "key", Message: msg})
	}
	if len(req.RestoreKeys) > maxRestoreKeys {
		details = append(details, errorDetail{Path: "restore_keys", Message: fmt.Sprintf("at most %d", maxRestoreKeys)})
	}
	for i, k := range req.RestoreKeys {
		if msg := checkCacheKey(k); msg != "" {
			details = append(details, errorDetail{Path: fmt.Sprintf("restore_keys[%d]", i), Message: msg})
		}
	}
	if details != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, "invalid cache restore", details)
		return
	}
	job, ok := s.cacheScopes(w, r, ref)
	if !ok || !job.declares(w, req.Key, req.RestoreKeys) {
		return
	}
	read := job.read
	c, err := s.store.FindCache(r.Context(), store.FindCacheParams{ProjectID: job.project, Scopes: read, Key: req.Key, RestoreKeys: req.RestoreKeys})
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusOK, map[string]any{"entry": nil, "scopes": read})
		return
	}
	if err != nil {
		s.storeError(w, r, "find cache", err)
		return
	}
	sg, err := s.blobs.PresignGet(r.Context(), c.SHA256, s.blobURLTTL, blob.GetOptions{})
	if err != nil {
		s.blobError(w, r, "sign cache download", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"scopes": read, "entry": map[string]any{
		"key": c.Key, "scope": c.Scope, "sha256": c.SHA256, "size": c.Size, "exact": c.Key == req.Key, "download": toSignedJSON(sg)}})
}

type saveCacheRequest struct {
	Token  string `json:"token"`
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

func (r *saveCacheRequest) token() string { return r.Token }

func (s *Server) saveCacheRequest(w http.ResponseWriter, r *http.Request) (*saveCacheRequest, store.LeaseRef, bool) {
	var req saveCacheRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok || !s.cachesOn(w) {
		return nil, ref, false
	}
	var details []errorDetail
	if msg := checkCacheKey(req.Key); msg != "" {
		details = append(details, errorDetail{Path: "key", Message: msg})
	}
	if !blob.ValidDigest(req.SHA256) {
		details = append(details, errorDetail{Path: "sha256", Message: "want a lowercase hex SHA-256 (64 characters)"})
	}
	if req.Size < 0 || req.Size > blob.MaxSize {
		details = append(details, errorDetail{Path: "size", Message: fmt.Sprintf("want 0 to %d bytes", int64(blob.MaxSize))})
	}
	if details != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, "invalid cache save", details)
		return nil, ref, false
	}
	return &req, ref, true
}

// saveCache is a worker asking to save an archive under a key in its run's scope. The
// answer is "exists" when the scope has an entry of that key (entries are immutable), or
// "saved" when the project holds the archive already (it uploaded those bytes before:
// deduplicated, nothing to upload), or "upload" with a pre-signed URL to PUT it to,
// after which the worker commits. An archive stored for other projects only is no
// reason to skip the upload, and the answer does not tell it from an unknown one.
func (s *Server) saveCache(w http.ResponseWriter, r *http.Request) {
	req, ref, ok := s.saveCacheRequest(w, r)
	if !ok {
		return
	}
	job, ok := s.cacheScopes(w, r, ref)
	if !ok || !job.declares(w, req.Key, nil) {
		return
	}
	project, scope := job.project, job.write
	// Saved since the job restored (by another job of the same key): no upload is needed.
	_, err := s.store.FindCache(r.Context(), store.FindCacheParams{ProjectID: project, Scopes: []string{scope}, Key: req.Key})
	if err == nil {
		writeJSON(w, http.StatusOK, map[string]any{"state": "exists", "scope": scope})
		return
	}
	if !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, r, "find cache", err)
		return
	}
	held, err := s.projectHolds(r.Context(), project, req.SHA256, req.Size)
	if err != nil && !errors.Is(err, blob.ErrMismatch) {
		s.blobError(w, r, "look up cache blob", err)
		return
	}
	if held {
		s.putCache(w, r, project, scope, req)
		return
	}
	sg, err := s.blobs.PresignUpload(r.Context(), blobOwner(project), req.SHA256, req.Size, s.blobURLTTL)
	if err != nil {
		s.blobError(w, r, "sign cache upload", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": "upload", "scope": scope, "upload": toSignedJSON(sg)})
}

// commitCache records the entry of an archive the worker uploaded, once the project
// holds it (takeUpload): the blob store's word, not the worker's, makes an entry, and
// only for the project whose upload it verified.
func (s *Server) commitCache(w http.ResponseWriter, r *http.Request) {
	req, ref, ok := s.saveCacheRequest(w, r)
	if !ok {
		return
	}
	job, ok := s.cacheScopes(w, r, ref)
	if !ok || !job.declares(w, req.Key, nil) {
		return
	}
	project, scope := job.project, job.write
	held, err := s.takeUpload(r.Context(), project, req.SHA256, req.Size)
	if errors.Is(err, blob.ErrMismatch) || (err == nil && !held) {
		writeError(w, http.StatusConflict, codeBlobMissing,
			fmt.Sprintf("no upload of blob %s of %d bytes for this project has reached the blob store", req.SHA256, req.Size), nil)
		return
	}
	if err != nil {
		s.blobError(w, r, "look up cache blob", err)
		return
	}
	s.putCache(w, r, project, scope, req)
}

func (s *Server) putCache(w http.ResponseWriter, r *http.Request, project uuid.UUID, scope string, req *saveCacheRequest) {
	_, created, err := s.store.PutCache(r.Context(), &store.CacheEntry{ProjectID: project, Scope: scope, Key: req.Key, SHA256: req.SHA256, Size: req.Size})
	if err != nil {
		s.storeError(w, r, "save cache", err)
		return
	}
	state := "saved"
	if !created {
		state = "exists" // another job saved the key first
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "scope": scope})
}

func (s *Server) listCaches(w http.ResponseWriter, r *http.Request) {
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	cs, err := s.store.ListCaches(r.Context(), p.ID)
	if err != nil {
		s.storeError(w, r, "list caches", err)
		return
	}
	out := make([]cacheJSON, len(cs))
	for i, c := range cs {
		out[i] = newCacheJSON(p.Name, c)
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteCaches deletes the project's entries that ?key= and ?scope= select, or all of
// them when neither is given.
func (s *Server) deleteCaches(w http.ResponseWriter, r *http.Request) {
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	n, err := s.store.DeleteCaches(r.Context(), store.DeleteCachesParams{ProjectID: p.ID, Key: q.Get("key"), Scope: q.Get("scope")})
	if err != nil {
		s.storeError(w, r, "delete caches", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": n})
}

func (s *Server) deleteCache(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		writeRequestError(w, badRequest("cache id %q is not a UUID", r.PathValue("id")))
		return
	}
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	n, err := s.store.DeleteCaches(r.Context(), store.DeleteCachesParams{ProjectID: p.ID, ID: id})
	if err != nil {
		s.storeError(w, r, "delete cache", err)
		return
	}
	if n == 0 {
		writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("project %s has no cache %s", p.Name, id), nil)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": n})
}
