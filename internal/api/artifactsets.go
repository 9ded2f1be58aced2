package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/store"
)

// artifactSetsRequest asks for named sets of artifacts of the job's run: those named,
// or those whose names match pattern (path.Match), or every one when neither is given.
type artifactSetsRequest struct {
	Token   string   `json:"token"`
	Names   []string `json:"names"`
	Pattern string   `json:"pattern"`
	// RunID, when set, asks for the sets of another run of the job's project
	// (download-artifact's run-id); Repository, when set, must be the project's.
	RunID      string `json:"run_id"`
	Repository string `json:"repository"`
}

func (r *artifactSetsRequest) token() string { return r.Token }

// maxSetsAsked bounds the names one request asks for.
const maxSetsAsked = 100

type setFile struct {
	Path     string      `json:"path"`
	SHA256   string      `json:"sha256"`
	Size     int64       `json:"size"`
	Mode     uint32      `json:"mode"`
	Download *signedJSON `json:"download"`
}

type artifactSet struct {
	Name  string    `json:"name"`
	Job   string    `json:"job"`
	Files []setFile `json:"files"`
	// Pending counts the files whose upload has not landed: not in Files.
	Pending int `json:"pending,omitempty"`
}

// artifactSets answers a worker's download-artifact step: the named sets the jobs of its
// run kept (a job's newest attempt that kept the set; of two jobs keeping one name, the
// later), each file with a pre-signed download URL and its path in the set, and the
// names asked for that no job kept.
func (s *Server) artifactSets(w http.ResponseWriter, r *http.Request) {
	var req artifactSetsRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok {
		return
	}
	var details []errorDetail
	if len(req.Names) > maxSetsAsked {
		details = append(details, errorDetail{Path: "names", Message: "want at most 100 names"})
	}
	for _, n := range req.Names {
		if msg := checkSetName(n); msg != "" {
			details = append(details, errorDetail{Path: "names", Message: n + " " + msg})
		}
	}
	if _, err := path.Match(req.Pattern, ""); err != nil {
		details = append(details, errorDetail{Path: "pattern", Message: "not a pattern: " + err.Error()})
	}
	if len(req.Names) > 0 && req.Pattern != "" {
		details = append(details, errorDetail{Path: "pattern", Message: "give names or a pattern, not both"})
	}
	if details != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, "invalid artifact sets request", details)
		return
	}
	job, err := s.store.GetJob(r.Context(), ref.JobID)
	if err != nil {
		s.agentError(w, r, "read job", err)
		return
	}
	if job.LeaseToken == "" || job.LeaseToken != ref.Token {
		writeError(w, http.StatusConflict, codeLeaseLost, "lease lost: the job's lease token is not this one", nil)
		return
	}
	runID := job.RunID
	if req.RunID != "" || req.Repository != "" {
		var err error
		if runID, err = s.otherRun(r.Context(), job, req.RunID, req.Repository); err != nil {
			var aerr *apiError
			if errors.As(err, &aerr) {
				aerr.write(w)
			} else {
				s.storeError(w, r, "read the run whose artifacts are asked for", err)
			}
			return
		}
	}
	sets, missing := []artifactSet{}, []string{}
	if s.blobs == nil {
		writeJSON(w, http.StatusOK, map[string]any{"sets": sets, "missing": append(missing, req.Names...)})
		return
	}
	jobs, err := s.store.ListJobs(r.Context(), runID)
	if err != nil {
		s.storeError(w, r, "list the run's jobs", err)
		return
	}
	keys := make(map[string]string, len(jobs))
	for _, j := range jobs {
		keys[j.ID.String()] = j.Key
	}
	as, err := s.store.ListRunArtifacts(r.Context(), runID)
	if err != nil {
		s.storeError(w, r, "list artifacts", err)
		return
	}
	// The newest attempt of each job that kept a set, and of the jobs that kept one
	// name the one that kept it last.
	type kept struct {
		job     string
		attempt int
		files   []*store.Artifact
	}
	byName := map[string]*kept{}
	for _, a := range as {
		if a.Set == "" || len(req.Names) > 0 && !slices.Contains(req.Names, a.Set) {
			continue
		}
		if req.Pattern != "" {
			if ok, _ := path.Match(req.Pattern, a.Set); !ok {
				continue
			}
		}
		k := byName[a.Set]
		job := a.JobID.String()
		switch {
		case k == nil, k.job != job && a.CreatedAt.After(k.files[0].CreatedAt), k.job == job && a.Attempt > k.attempt:
			byName[a.Set] = &kept{job: job, attempt: a.Attempt, files: []*store.Artifact{a}}
		case k.job == job && a.Attempt == k.attempt:
			k.files = append(k.files, a)
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := byName[n]
		set := artifactSet{Name: n, Job: keys[k.job], Files: []setFile{}}
		for _, a := range k.files {
			if a.State != store.ArtifactStored {
				set.Pending++
				continue
			}
			sg, err := s.blobs.PresignGet(r.Context(), a.SHA256, s.blobURLTTL, blob.GetOptions{})
			if err != nil {
				s.blobError(w, r, "sign artifact download", err)
				return
			}
			set.Files = append(set.Files, setFile{Path: a.SetPath, SHA256: a.SHA256, Size: a.Size, Mode: a.Mode, Download: toSignedJSON(sg)})
		}
		sets = append(sets, set)
	}
	for _, n := range req.Names {
		if byName[n] == nil {
			missing = append(missing, n)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sets": sets, "missing": missing})
}

// otherRun checks a download of another run's artifacts (download-artifact's run-id and
// repository) by a job and returns the run to read: only a run of the job's own project,
// since a project's artifacts are its own (docs/security.md). A run of another project
// is answered as one that does not exist, so a job cannot learn which runs others have.
// An empty runID is the job's own run. The error is an *apiError, or the store's.
func (s *Server) otherRun(ctx context.Context, job *store.Job, runID, repository string) (uuid.UUID, error) {
	notHere := func(format string, args ...any) *apiError {
		return &apiError{status: http.StatusNotFound, code: codeNotFound, msg: fmt.Sprintf(format, args...) +
			"; a step downloads the artifacts of runs of its own project only"}
	}
	own, err := s.store.GetRun(ctx, job.RunID)
	if err != nil {
		return uuid.Nil, fmt.Errorf("read run %s: %w", job.RunID, err)
	}
	proj, err := s.store.GetProjectByName(ctx, own.Project)
	if err != nil {
		return uuid.Nil, fmt.Errorf("read project %q: %w", own.Project, err)
	}
	if repository != "" && !sameRepository(repository, own.Trigger.Repository, proj.RepoURL) {
		return uuid.Nil, notHere("repository %q is not the repository of project %s", repository, proj.Name)
	}
	if runID == "" {
		return job.RunID, nil
	}
	id, err := uuid.Parse(strings.TrimSpace(runID))
	if err != nil {
		return uuid.Nil, &apiError{status: http.StatusBadRequest, code: codeBadRequest,
			msg: fmt.Sprintf("run-id %q is not a Gantry run id (a UUID, as github.event.workflow_run.id and GANTRY_RUN_ID give)", runID)}
	}
	run, err := s.store.GetRun(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && run.ProjectID != job.ProjectID:
		return uuid.Nil, notHere("run %s is not a run of project %s", id, proj.Name)
	case err != nil:
		return uuid.Nil, fmt.Errorf("read run %s: %w", id, err)
	}
	return id, nil
}

// sameRepository says whether a repository a step names (owner/name, or a URL) is the
// project's: the one its run's trigger names, or the one its remote URL names. Forges
// compare these without regard to case.
func sameRepository(named, runRepo, remote string) bool {
	norm := func(s string) string {
		s = strings.TrimSpace(s)
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			s = u.Path
		} else if _, after, ok := strings.Cut(s, ":"); ok && !strings.Contains(s, "://") {
			s = after
		}
		return strings.ToLower(strings.TrimSuffix(strings.Trim(s, "/"), ".git"))
	}
	n := norm(named)
	if n == "" {
		return false
	}
	return n == norm(runRepo) || n == norm(remote)
}
