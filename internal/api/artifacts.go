package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// Artifact defaults.
const (
	// DefaultBlobURLTTL is how long a pre-signed upload or download URL stays valid. An
	// upload retried in the background after its job ended uses the URL it was given, so
	// this outlasts the worker's retry budget.
	DefaultBlobURLTTL = time.Hour
	// DefaultBlobPrefix is the request path the local blob store's handler is mounted on.
	DefaultBlobPrefix = "/blobs/"
	// maxArtifactsPerRequest bounds one registration; a job with more files registers in
	// several requests.
	maxArtifactsPerRequest = 1000
)

const codeBlobMissing = "blob_missing"

func (s *Server) artifactRoutes() {
	s.handle("POST /api/v1/agent/jobs/{id}/artifacts", agentAccess, s.registerArtifacts)
	s.handle("POST /api/v1/agent/jobs/{id}/inputs", agentAccess, s.jobInputs)
	s.handle("POST /api/v1/agent/jobs/{id}/artifact-sets", agentAccess, s.artifactSets)
	s.handle("POST /api/v1/agent/artifacts/{id}/stored", agentAccess, s.artifactStored)
	s.handle("GET /api/v1/jobs/{id}/artifacts", on(thingJob, store.RoleViewer), s.jobArtifacts)
	s.handle("GET /api/v1/runs/{id}/artifacts", on(thingRun, store.RoleViewer), s.runArtifacts)
	s.handle("GET /api/v1/artifacts/{id}", on(thingArtifact, store.RoleViewer), s.downloadArtifact)
	if h, ok := s.blobs.(blob.Handler); ok {
		// Signed URLs carry their own authorization: the blob store checks them.
		// Method by method, so that the dashboard's GET / does not overlap them.
		bh := h.Handler()
		s.note("GET "+s.blobPrefix, public)
		s.note("PUT "+s.blobPrefix, public)
		s.mux.Handle("GET "+s.blobPrefix, bh)
		s.mux.Handle("PUT "+s.blobPrefix, bh)
	}
}

// signedJSON is a pre-signed request as the worker protocol sends it.
type signedJSON struct {
	Method    string              `json:"method"`
	URL       string              `json:"url"`
	Header    map[string][]string `json:"header,omitempty"`
	ExpiresAt string              `json:"expires_at"`
}

func toSignedJSON(sg blob.Signed) *signedJSON {
	return &signedJSON{Method: sg.Method, URL: sg.URL, Header: sg.Header, ExpiresAt: formatTime(sg.Expires)}
}

type artifactFile struct {
	Name string `json:"name"`
	// SetPath is the file's path in the request's set; "" when it names none.
	SetPath   string `json:"set_path,omitempty"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type"`
	// Mode holds the file's permission bits; 0 means 0644.
	Mode uint32 `json:"mode"`
}

type registerArtifactsRequest struct {
	Token     string         `json:"token"`
	Artifacts []artifactFile `json:"artifacts"`
	// RetentionDays, when not 0, keeps these files that many days, in place of the job's
	// artifacts: setting: a workflow's upload-artifact step says it for its own.
	RetentionDays int `json:"retention_days"`
	// Set names the set the files are kept in (a workflow's upload-artifact), each at
	// its set_path; "" for the job's artifacts: of Gantry's own language.
	Set string `json:"set"`
}

// maxSetName bounds the name of a set of artifacts.
const maxSetName = 256

// checkSetName says what is wrong with the name of a set of artifacts, or "": GitHub's
// rules for an artifact's name, which becomes a directory of a download.
func checkSetName(n string) string {
	switch {
	case strings.TrimSpace(n) == "":
		return "is empty"
	case len(n) > maxSetName:
		return fmt.Sprintf("is longer than %d bytes", maxSetName)
	case !utf8.ValidString(n) || strings.ContainsFunc(n, unicode.IsControl):
		return "holds a control character or is not UTF-8"
	case strings.ContainsAny(n, `":<>|*?\/`):
		return `must not hold any of " : < > | * ? \ /`
	case n == "." || n == "..":
		return "is not a name"
	}
	return ""
}

// maxRetentionDays bounds a registration's retention_days.
const maxRetentionDays = 3650

func (r *registerArtifactsRequest) token() string { return r.Token }

type registeredArtifact struct {
	ID    uuid.UUID           `json:"id"`
	Name  string              `json:"name"`
	State store.ArtifactState `json:"state"`
	// Upload is where to PUT the blob; absent when the blob store already holds it.
	Upload *signedJSON `json:"upload,omitempty"`
}

// registerArtifacts records the files a job kept and answers, for each, either that the
// blob store already holds its content or a pre-signed URL to upload it to. Only the
// worker holding the job's lease may register.
func (s *Server) registerArtifacts(w http.ResponseWriter, r *http.Request) {
	var req registerArtifactsRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok || !s.needBlobs(w) {
		return
	}
	if len(req.Artifacts) == 0 || len(req.Artifacts) > maxArtifactsPerRequest {
		writeError(w, http.StatusBadRequest, codeBadRequest,
			fmt.Sprintf("artifacts: want 1 to %d files, got %d", maxArtifactsPerRequest, len(req.Artifacts)), nil)
		return
	}
	var details []errorDetail
	seen := map[string]bool{}
	for i, a := range req.Artifacts {
		p := fmt.Sprintf("artifacts[%d]", i)
		if msg := pipeline.CheckArtifactName(a.Name); msg != "" {
			details = append(details, errorDetail{Path: p + ".name", Message: msg})
		} else if strings.ContainsFunc(a.Name, unicode.IsControl) || !utf8.ValidString(a.Name) {
			// Names become download file names and Content-Disposition headers, and are
			// printed in terminals: a CR or LF would split a header or forge a line.
			details = append(details, errorDetail{Path: p + ".name",
				Message: fmt.Sprintf("%q holds a control character (CR, LF, tab...) or is not UTF-8", a.Name)})
		} else if seen[a.Name] {
			details = append(details, errorDetail{Path: p + ".name", Message: fmt.Sprintf("%q is listed twice", a.Name)})
		}
		seen[a.Name] = true
		if !blob.ValidDigest(a.SHA256) {
			details = append(details, errorDetail{Path: p + ".sha256", Message: "want a lowercase hex SHA-256 (64 characters)"})
		}
		if a.Size < 0 || a.Size > blob.MaxSize {
			details = append(details, errorDetail{Path: p + ".size", Message: fmt.Sprintf("want 0 to %d bytes", int64(blob.MaxSize))})
		}
		if a.Mode > 0o777 {
			details = append(details, errorDetail{Path: p + ".mode", Message: "want permission bits, 0 to 0777"})
		}
		switch {
		case req.Set == "" && a.SetPath != "":
			details = append(details, errorDetail{Path: p + ".set_path", Message: "a path in a set needs the request's set"})
		case req.Set != "":
			if msg := pipeline.CheckArtifactName(a.SetPath); msg != "" {
				details = append(details, errorDetail{Path: p + ".set_path", Message: msg})
			}
		}
		if len(a.MediaType) > 255 || strings.ContainsAny(a.MediaType, "\r\n") {
			details = append(details, errorDetail{Path: p + ".media_type", Message: "want a media type of at most 255 characters on one line"})
		}
	}
	if req.Set != "" {
		if msg := checkSetName(req.Set); msg != "" {
			details = append(details, errorDetail{Path: "set", Message: fmt.Sprintf("%q %s", req.Set, msg)})
		}
	}
	if req.RetentionDays < 0 || req.RetentionDays > maxRetentionDays {
		details = append(details, errorDetail{Path: "retention_days", Message: fmt.Sprintf("want 0 (the job's setting) to %d days", maxRetentionDays)})
	}
	if details != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, "invalid artifacts", details)
		return
	}
	job, err := s.store.GetJob(r.Context(), ref.JobID)
	if err != nil {
		s.agentError(w, r, "register artifacts", err)
		return
	}
	var expires time.Time
	if req.RetentionDays > 0 {
		expires = s.clock.Now().Add(time.Duration(req.RetentionDays) * 24 * time.Hour)
	} else if job.Spec != nil && job.Spec.Artifacts != nil && job.Spec.Artifacts.ExpireIn > 0 {
		expires = s.clock.Now().Add(time.Duration(job.Spec.Artifacts.ExpireIn))
	} else if s.artifactTTL > 0 {
		expires = s.clock.Now().Add(s.artifactTTL)
	}
	out := make([]registeredArtifact, 0, len(req.Artifacts))
	for _, f := range req.Artifacts {
		a, err := s.store.PutArtifact(r.Context(), ref, &store.Artifact{
			JobID: ref.JobID, Name: f.Name, SHA256: f.SHA256, Size: f.Size, MediaType: f.MediaType, Mode: f.Mode, ExpiresAt: expires,
			Set: req.Set, SetPath: f.SetPath})
		if err != nil {
			s.agentError(w, r, "register artifact", err)
			return
		}
		if a.SHA256 != f.SHA256 || a.Size != f.Size {
			writeError(w, http.StatusConflict, codeConflict,
				fmt.Sprintf("artifact %q of this attempt is already registered with other content (sha256 %s, %d bytes)", f.Name, a.SHA256, a.Size), nil)
			return
		}
		reg := registeredArtifact{ID: a.ID, Name: a.Name, State: a.State}
		if a.State != store.ArtifactStored {
			// Only the project's own uploads count: a digest stored for another project
			// gets the upload URL an unknown one gets, and says nothing of that project.
			held, err := s.projectHolds(r.Context(), job.ProjectID, a.SHA256, a.Size)
			if err == nil && held {
				err = s.store.MarkArtifactStored(r.Context(), a.ID)
			}
			if err != nil {
				s.blobError(w, r, "look up artifact blob", err)
				return
			}
			if held {
				reg.State = store.ArtifactStored
			} else {
				sg, err := s.blobs.PresignUpload(r.Context(), blobOwner(job.ProjectID), a.SHA256, a.Size, s.blobURLTTL)
				if err != nil {
					s.blobError(w, r, "sign artifact upload", err)
					return
				}
				reg.Upload = toSignedJSON(sg)
			}
		}
		out = append(out, reg)
	}
	writeJSON(w, http.StatusOK, map[string]any{"artifacts": out})
}

// blobOwner is the label a project's uploads are staged under in the blob store.
func blobOwner(project uuid.UUID) string { return project.String() }

// projectHolds reports whether the blob store holds the content of digest for the
// project: the project owns the digest (it uploaded the content once) and the blob is
// there. A blob stored for other projects only is not held: deduplication saves storage,
// never grants access.
func (s *Server) projectHolds(ctx context.Context, project uuid.UUID, digest string, size int64) (bool, error) {
	owned, err := s.store.BlobOwned(ctx, project, digest)
	if err != nil || !owned {
		return false, err
	}
	info, err := s.blobs.Stat(ctx, digest)
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil // collected since: the project uploads it again
	}
	if err != nil {
		return false, err
	}
	if info.Size != size {
		return false, fmt.Errorf("blob %s holds %d bytes, the request says %d: %w", digest, info.Size, size, blob.ErrMismatch)
	}
	return true, nil
}

// takeUpload is a worker of the project saying it uploaded the content of digest. The
// project holds it when it did already, or when the blob store has an upload of it
// staged for the project, which it verified as it arrived: that upload becomes the blob,
// and the digest the project's. The worker's word is never enough, and neither is a blob
// some other project stored.
func (s *Server) takeUpload(ctx context.Context, project uuid.UUID, digest string, size int64) (bool, error) {
	if held, err := s.projectHolds(ctx, project, digest, size); err != nil || held {
		return held, err
	}
	err := s.blobs.CommitUpload(ctx, blobOwner(project), digest, size)
	if errors.Is(err, blob.ErrNotFound) {
		// Nothing staged; a commit racing this one may have taken it a moment ago.
		return s.projectHolds(ctx, project, digest, size)
	}
	if err != nil {
		return false, err
	}
	if err := s.store.AddBlobOwner(ctx, project, digest); err != nil {
		return false, err
	}
	return true, nil
}

// artifactStored is the worker saying it uploaded an artifact's blob. The artifact is
// stored only when its project holds the content (takeUpload). The job's lease is not
// needed: an upload retried after the job ended still lands.
func (s *Server) artifactStored(w http.ResponseWriter, r *http.Request) {
	a, ok := s.artifactRequest(w, r)
	if !ok {
		return
	}
	if a.State != store.ArtifactStored {
		job, err := s.store.GetJob(r.Context(), a.JobID)
		if err != nil {
			s.storeError(w, r, "read the artifact's job", err)
			return
		}
		stored, err := s.takeUpload(r.Context(), job.ProjectID, a.SHA256, a.Size)
		if err == nil && stored {
			err = s.store.MarkArtifactStored(r.Context(), a.ID)
		}
		if err != nil {
			s.blobError(w, r, "look up artifact blob", err)
			return
		}
		if !stored {
			writeError(w, http.StatusConflict, codeBlobMissing,
				fmt.Sprintf("artifact %s: no upload of blob %s for this project has reached the blob store", a.ID, a.SHA256), nil)
			return
		}
		s.metrics.ArtifactBytes.Add(float64(a.Size))
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": a.ID, "state": store.ArtifactStored})
}

type inputArtifact struct {
	ID       uuid.UUID   `json:"id"`
	Job      string      `json:"job"`
	Name     string      `json:"name"`
	SHA256   string      `json:"sha256"`
	Size     int64       `json:"size"`
	Mode     uint32      `json:"mode"`
	Download *signedJSON `json:"download"`
}

type missingArtifact struct {
	Job  string `json:"job"`
	Name string `json:"name"`
}

// jobInputs answers the artifacts a job's needs kept in their current attempts, each
// with a pre-signed download URL, and names those whose upload has not landed. Without a
// blob store the answer is empty: no job could keep any.
func (s *Server) jobInputs(w http.ResponseWriter, r *http.Request) {
	var req tokenRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok {
		return
	}
	job, err := s.store.GetJob(r.Context(), ref.JobID)
	if err != nil {
		s.agentError(w, r, "read job inputs", err)
		return
	}
	if job.LeaseToken == "" || job.LeaseToken != ref.Token {
		writeError(w, http.StatusConflict, codeLeaseLost, "lease lost: the job's lease token is not this one", nil)
		return
	}
	inputs, missing := []inputArtifact{}, []missingArtifact{}
	// Without a blob store no artifact was kept, so there is nothing to fetch.
	if s.blobs != nil && job.Spec != nil && len(job.Spec.Needs) > 0 {
		jobs, err := s.store.ListJobs(r.Context(), job.RunID)
		if err != nil {
			s.storeError(w, r, "list the run's jobs", err)
			return
		}
		byKey := make(map[string]*store.Job, len(jobs))
		for _, j := range jobs {
			byKey[j.Key] = j
		}
		for _, key := range job.Spec.Needs {
			need := byKey[key]
			if need == nil {
				continue
			}
			as, err := s.store.ListArtifacts(r.Context(), need.ID)
			if err != nil {
				s.storeError(w, r, "list artifacts", err)
				return
			}
			seen := map[string]bool{}
			for _, a := range as {
				if a.Attempt != need.Attempt || seen[a.Name] {
					// A file kept in several sets is fetched once, to its path.
					continue
				}
				seen[a.Name] = true
				if a.State != store.ArtifactStored {
					missing = append(missing, missingArtifact{Job: need.Key, Name: a.Name})
					continue
				}
				sg, err := s.blobs.PresignGet(r.Context(), a.SHA256, s.blobURLTTL, blob.GetOptions{})
				if err != nil {
					s.blobError(w, r, "sign artifact download", err)
					return
				}
				inputs = append(inputs, inputArtifact{ID: a.ID, Job: need.Key, Name: a.Name, SHA256: a.SHA256, Size: a.Size, Mode: a.Mode, Download: toSignedJSON(sg)})
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"artifacts": inputs, "missing": missing})
}

type artifactJSON struct {
	ID    uuid.UUID `json:"id"`
	JobID uuid.UUID `json:"job_id"`
	Job   string    `json:"job,omitempty"`
	// Set is the named set the file was kept in (a workflow's upload-artifact), or in
	// run listings the name the job's artifacts: gives its files; SetPath its path in
	// the set.
	Set       string              `json:"set,omitempty"`
	SetPath   string              `json:"set_path,omitempty"`
	Attempt   int                 `json:"attempt"`
	Name      string              `json:"name"`
	SHA256    string              `json:"sha256"`
	Size      int64               `json:"size"`
	MediaType string              `json:"media_type,omitempty"`
	Mode      uint32              `json:"mode"`
	State     store.ArtifactState `json:"state"`
	CreatedAt string              `json:"created_at"`
	ExpiresAt string              `json:"expires_at,omitempty"`
}

func toArtifactJSON(a *store.Artifact, jobKey string) artifactJSON {
	out := artifactJSON{ID: a.ID, JobID: a.JobID, Job: jobKey, Attempt: a.Attempt, Name: a.Name, SHA256: a.SHA256, Size: a.Size,
		MediaType: a.MediaType, Mode: a.Mode, State: a.State, CreatedAt: formatTime(a.CreatedAt), Set: a.Set, SetPath: a.SetPath}
	if !a.ExpiresAt.IsZero() {
		out.ExpiresAt = formatTime(a.ExpiresAt)
	}
	return out
}

// jobArtifacts lists a job's artifacts, of every attempt.
func (s *Server) jobArtifacts(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	job, err := s.store.GetJob(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "get job", err)
		return
	}
	as, err := s.store.ListArtifacts(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "list artifacts", err)
		return
	}
	out := make([]artifactJSON, len(as))
	for i, a := range as {
		out[i] = toArtifactJSON(a, job.Key)
	}
	writeJSON(w, http.StatusOK, out)
}

// runArtifacts lists the artifacts of every job of a run.
func (s *Server) runArtifacts(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if _, err := s.store.GetRun(r.Context(), id); err != nil {
		s.storeError(w, r, "get run", err)
		return
	}
	jobs, err := s.store.ListJobs(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "list the run's jobs", err)
		return
	}
	keys := make(map[uuid.UUID]string, len(jobs))
	sets := make(map[uuid.UUID]string, len(jobs))
	for _, j := range jobs {
		keys[j.ID] = j.Key
		if j.Spec != nil && j.Spec.Artifacts != nil {
			sets[j.ID] = j.Spec.Artifacts.Name
		}
	}
	as, err := s.store.ListRunArtifacts(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "list artifacts", err)
		return
	}
	out := make([]artifactJSON, len(as))
	for i, a := range as {
		out[i] = toArtifactJSON(a, keys[a.JobID])
		if a.Set == "" {
			out[i].Set = sets[a.JobID]
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// downloadArtifact redirects to a pre-signed download URL of a stored artifact, or with
// ?redirect=false answers it as JSON: the bytes never pass through the coordinator.
func (s *Server) downloadArtifact(w http.ResponseWriter, r *http.Request) {
	a, ok := s.artifactRequest(w, r)
	if !ok {
		return
	}
	if a.State != store.ArtifactStored {
		writeError(w, http.StatusConflict, codeBlobMissing, fmt.Sprintf("artifact %s is still being uploaded", a.ID), nil)
		return
	}
	sg, err := s.blobs.PresignGet(r.Context(), a.SHA256, s.blobURLTTL,
		blob.GetOptions{Filename: path.Base(a.Name), MediaType: a.MediaType})
	if err != nil {
		s.blobError(w, r, "sign artifact download", err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("redirect") == "false" {
		// For pages that fetch with a token: they open the signed URL themselves.
		writeJSON(w, http.StatusOK, map[string]string{"url": sg.URL, "expires_at": formatTime(sg.Expires)})
		return
	}
	http.Redirect(w, r, sg.URL, http.StatusFound)
}

// artifactRequest reads the artifact a request's path names, answering the error itself
// when it cannot.
func (s *Server) artifactRequest(w http.ResponseWriter, r *http.Request) (*store.Artifact, bool) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return nil, false
	}
	if !s.needBlobs(w) {
		return nil, false
	}
	a, err := s.store.GetArtifact(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "get artifact", err)
		return nil, false
	}
	return a, true
}

func (s *Server) needBlobs(w http.ResponseWriter) bool {
	if s.blobs == nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "this coordinator has no blob store configured", nil)
		return false
	}
	return true
}

// blobError answers a failure of the blob store: its own bad-request errors as 400,
// anything else as 503, since the store is a dependency that may come back.
func (s *Server) blobError(w http.ResponseWriter, r *http.Request, action string, err error) {
	switch {
	case errors.Is(err, blob.ErrInvalid), errors.Is(err, blob.ErrMismatch):
		writeError(w, http.StatusBadRequest, codeBadRequest, action+": "+err.Error(), nil)
	case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrNotFound):
		s.agentError(w, r, action, err)
	case isStorageFull(err):
		s.storageFullError(w, r, storageBlobs, action, err)
	default:
		s.log.ErrorContext(r.Context(), action, "err", err)
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, action+": the blob store is unavailable", nil)
	}
}
