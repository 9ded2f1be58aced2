package api

import (
	"net/http"
	"path"
	"slices"
	"sort"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/store"
)

// artifactSetsRequest asks for named sets of artifacts of the job's run: those named,
// or those whose names match pattern (path.Match), or every one when neither is given.
type artifactSetsRequest struct {
	Token   string   `json:"token"`
	Names   []string `json:"names"`
	Pattern string   `json:"pattern"`
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
	sets, missing := []artifactSet{}, []string{}
	if s.blobs == nil {
		writeJSON(w, http.StatusOK, map[string]any{"sets": sets, "missing": append(missing, req.Names...)})
		return
	}
	jobs, err := s.store.ListJobs(r.Context(), job.RunID)
	if err != nil {
		s.storeError(w, r, "list the run's jobs", err)
		return
	}
	keys := make(map[string]string, len(jobs))
	for _, j := range jobs {
		keys[j.ID.String()] = j.Key
	}
	as, err := s.store.ListRunArtifacts(r.Context(), job.RunID)
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
