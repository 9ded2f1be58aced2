package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// Artifact transfer timings.
const (
	// uploadRetryFor bounds the background retries of an upload that failed when its job
	// ended; it stays inside the coordinator's signed-URL lifetime.
	uploadRetryFor = 10 * time.Minute
	// registerBatch is how many files one registration names.
	registerBatch = 500
)

// signed is a pre-signed request as the coordinator sends it.
type signed struct {
	Method    string              `json:"method"`
	URL       string              `json:"url"`
	Header    map[string][]string `json:"header"`
	ExpiresAt time.Time           `json:"expires_at"`
}

func (s *signed) blob() blob.Signed {
	return blob.Signed{Method: s.Method, URL: s.URL, Header: http.Header(s.Header), Expires: s.ExpiresAt}
}

// keptFile is a workspace file a job keeps as an artifact.
type keptFile struct {
	Name      string `json:"name"` // slash-separated, relative to the workspace
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type"`
	Mode      uint32 `json:"mode"`
	// SetPath is its path in the set it is kept in, if any (inSet).
	SetPath string `json:"set_path,omitempty"`
	path    string // where it is on disk
}

type registered struct {
	ID     string  `json:"id"`
	Name   string  `json:"name"`
	State  string  `json:"state"`
	Upload *signed `json:"upload"`
}

// baseURL is what relative signed URLs (the coordinator's own blob store) resolve
// against: the replica in use, which most likely signed them.
func (a *Agent) baseURL() (*url.URL, error) {
	return url.Parse(a.c.base() + "/")
}

// collectArtifacts finds the workspace files the job's artifact paths match, without
// following a symlink out of the workspace, and hashes them. Paths that match nothing and
// files it will not keep are told in the job's log.
func collectArtifacts(ws string, spec *pipeline.Artifacts, rec *logs.Recorder) ([]keptFile, error) {
	files, err := findFiles(ws, spec.Paths, "artifacts", rec)
	if err != nil {
		return nil, err
	}
	for i := range files {
		f := &files[i]
		if msg := pipeline.CheckArtifactName(f.Name); msg != "" {
			return nil, fmt.Errorf("artifact %q %s", f.Name, msg)
		}
		sum, size, mode, err := hashFile(f.path)
		if err != nil {
			return nil, err
		}
		f.SHA256, f.Size, f.Mode = sum, size, uint32(mode.Perm())
		f.MediaType = mime.TypeByExtension(path.Ext(f.Name))
		if f.MediaType == "" {
			f.MediaType = "application/octet-stream"
		}
	}
	return files, nil
}

// findFiles finds the workspace files that paths (artifact paths: globs, "**", a
// directory for all below it) match, without following a symlink out of the
// workspace. Paths that match nothing and files it will not keep are told in the job's
// log, after what ("artifacts: ...").
func findFiles(ws string, paths []string, what string, rec *logs.Recorder) ([]keptFile, error) {
	root, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return nil, err
	}
	matched := make([]bool, len(paths))
	var files []keptFile
	var keptDirs []string // matched directories: everything below them is kept
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		below := false
		for _, dir := range keptDirs {
			if strings.HasPrefix(name, dir+"/") {
				below = true
				break
			}
		}
		hit := below
		for i, pat := range paths {
			if pipeline.MatchArtifactPath(strings.TrimSuffix(pat, "/"), name) {
				matched[i], hit = true, true
			}
		}
		if !hit {
			return nil
		}
		switch {
		case d.IsDir():
			if !below {
				keptDirs = append(keptDirs, name)
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				rec.System(fmt.Sprintf("%s: %s is a broken symlink; not kept", what, name))
				return nil
			}
			if target != root && !strings.HasPrefix(target, root+string(filepath.Separator)) {
				rec.System(fmt.Sprintf("%s: %s is a symlink leading out of the workspace; not kept", what, name))
				return nil
			}
			st, err := os.Stat(target)
			if err != nil || !st.Mode().IsRegular() {
				rec.System(fmt.Sprintf("%s: %s is a symlink to something other than a file; not kept", what, name))
				return nil
			}
			files = append(files, keptFile{Name: name, path: target})
		case d.Type().IsRegular():
			files = append(files, keptFile{Name: name, path: p})
		default:
			rec.System(fmt.Sprintf("%s: %s is not a regular file; not kept", what, name))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find %s files: %w", what, err)
	}
	for i, ok := range matched {
		if !ok {
			rec.System(fmt.Sprintf("%s: no file matches %q", what, paths[i]))
		}
	}
	return files, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// rate tells how long a transfer took and, for one that moved a megabyte or more, its
// speed.
func rate(size int64, d time.Duration) string {
	d = d.Round(time.Millisecond)
	if size < 1<<20 || d <= 0 {
		return d.String()
	}
	return fmt.Sprintf("%s (%.0f MB/s)", d, float64(size)/1e6/d.Seconds())
}

func hashFile(p string) (string, int64, fs.FileMode, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, 0, fmt.Errorf("read artifact: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, 0, fmt.Errorf("read artifact: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, 0, fmt.Errorf("hash artifact %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, st.Mode(), nil
}

// keepArtifacts registers the job's artifacts and uploads those the blob store lacks. An
// upload that fails is retried in the background from a hard link (or copy) of the file,
// so the job's result does not wait on the blob store; the artifact stays pending until
// the retry lands. It returns an error only for what keeps the artifacts from being
// registered at all.
func (a *Agent) keepArtifacts(ctx context.Context, log *slog.Logger, j claimedJob, ws string, rec *logs.Recorder) error {
	start := time.Now()
	files, err := collectArtifacts(ws, j.Spec.Artifacts, rec)
	if err != nil || len(files) == 0 {
		return err
	}
	set := j.Spec.Artifacts.Name
	if set != "" {
		inSet(files, uploadRoot(ws, j.Spec.Artifacts.Paths))
	}
	return a.keepFiles(ctx, log, j, files, set, start, 0, rec)
}

// keepFiles registers files of the job as its artifacts, in the named set when set is not
// "" (each at its SetPath), kept for retentionDays when
// that is not 0 (otherwise as the job's artifacts: setting or the coordinator says), and
// uploads those the blob store lacks, as keepArtifacts does. start is when they began
// to be found and hashed.
func (a *Agent) keepFiles(ctx context.Context, log *slog.Logger, j claimedJob, files []keptFile, set string, start time.Time, retentionDays int, rec *logs.Recorder) error {
	var total int64
	for _, f := range files {
		total += f.Size
	}
	rec.System(fmt.Sprintf("artifacts: %d %s, %d bytes, hashed in %s", len(files), plural(len(files), "file", "files"), total, rate(total, time.Since(start))))
	base, err := a.baseURL()
	if err != nil {
		return err
	}
	byName := make(map[string]keptFile, len(files))
	for _, f := range files {
		byName[f.Name] = f
	}
	for start := 0; start < len(files); start += registerBatch {
		batch := files[start:min(start+registerBatch, len(files))]
		var ans struct {
			Artifacts []registered `json:"artifacts"`
		}
		body := map[string]any{"token": j.Lease.Token, "artifacts": batch}
		if retentionDays > 0 {
			body["retention_days"] = retentionDays
		}
		if set != "" {
			body["set"] = set
		}
		err := a.c.post(ctx, "/api/v1/agent/jobs/"+j.ID+"/artifacts", body, &ans)
		if err != nil {
			return fmt.Errorf("register artifacts: %w", err)
		}
		for _, r := range ans.Artifacts {
			f := byName[r.Name]
			if r.Upload == nil {
				rec.System(fmt.Sprintf("artifacts: kept %s (%d bytes, sha256 %s, already stored)", f.Name, f.Size, f.SHA256))
				continue
			}
			start := time.Now()
			err := a.upload(ctx, base, r, f)
			if err == nil {
				rec.System(fmt.Sprintf("artifacts: kept %s (%d bytes, sha256 %s), uploaded in %s", f.Name, f.Size, f.SHA256, rate(f.Size, time.Since(start))))
				continue
			}
			if !retryable(err) {
				rec.System(fmt.Sprintf("artifacts: %s was refused: %v", f.Name, err))
				log.Error("artifact upload refused", "artifact", f.Name, "err", err)
				continue
			}
			rec.System(fmt.Sprintf("artifacts: uploading %s failed (%v); retrying in the background", f.Name, err))
			log.Warn("artifact upload failed; retrying in the background", "artifact", f.Name, "err", err)
			if err := a.retryUpload(log, base, r, f); err != nil {
				log.Error("keep the artifact for a retry", "artifact", f.Name, "err", err)
			}
		}
	}
	return nil
}

// upload sends a file to its signed URL and tells the coordinator it landed.
func (a *Agent) upload(ctx context.Context, base *url.URL, r registered, f keptFile) error {
	file, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer file.Close()
	resp, err := blob.Send(ctx, a.blobHTTP, base, r.Upload.blob(), file, f.Size)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a.cfg.Metrics.ArtifactUploaded(f.Size)
	return a.c.post(ctx, "/api/v1/agent/artifacts/"+r.ID+"/stored", map[string]any{}, nil)
}

// retryable tells a failure that may pass (the blob store or coordinator down) from a
// refusal (a digest mismatch, an expired URL).
func retryable(err error) bool {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Code == "blob_missing"
	}
	var re *blob.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests
	}
	return !errors.Is(err, context.Canceled)
}

// retryUpload keeps a link to the file outside the workspace, which is deleted when the
// job ends, and retries its upload with backoff for up to uploadRetryFor.
func (a *Agent) retryUpload(log *slog.Logger, base *url.URL, r registered, f keptFile) error {
	dir, err := os.MkdirTemp(a.cfg.WorkDir, "gantry-upload-")
	if err != nil {
		return err
	}
	kept := filepath.Join(dir, "blob")
	if err := os.Link(f.path, kept); err != nil {
		if err := copyFile(f.path, kept); err != nil {
			_ = os.RemoveAll(dir)
			return err
		}
	}
	f.path = kept
	a.uploads.Add(1)
	go func() {
		defer a.uploads.Done()
		defer os.RemoveAll(dir)
		ctx, stop := context.WithTimeout(a.uploadCtx, uploadRetryFor)
		defer stop()
		for backoff := time.Second; ; backoff = min(backoff*2, time.Minute) {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				log.Error("gave up uploading an artifact; it stays pending", "artifact", f.Name)
				return
			}
			err := a.upload(ctx, base, r, f)
			if err == nil {
				log.Info("artifact uploaded after a retry", "artifact", f.Name)
				return
			}
			if !retryable(err) {
				log.Error("artifact upload refused", "artifact", f.Name, "err", err)
				return
			}
		}
	}()
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// fetchInputs downloads the artifacts of the jobs this one needs into its workspace, at
// their recorded paths, checking each one's digest before it appears there.
func (a *Agent) fetchInputs(ctx context.Context, j claimedJob, ws string, rec *logs.Recorder) error {
	if len(j.Spec.Needs) == 0 || j.Spec.NoInputs {
		return nil
	}
	var ans struct {
		Artifacts []struct {
			Job      string  `json:"job"`
			Name     string  `json:"name"`
			SHA256   string  `json:"sha256"`
			Size     int64   `json:"size"`
			Mode     uint32  `json:"mode"`
			Download *signed `json:"download"`
		} `json:"artifacts"`
		Missing []struct {
			Job  string `json:"job"`
			Name string `json:"name"`
		} `json:"missing"`
	}
	// A coordinator outage is waited out, as reports are: it is no reason to fail the job.
	if err := a.retryPost(ctx, "/api/v1/agent/jobs/"+j.ID+"/inputs", map[string]any{"token": j.Lease.Token}, &ans); err != nil {
		return fmt.Errorf("list the artifacts of the jobs this one needs: %w", err)
	}
	for _, m := range ans.Missing {
		rec.System(fmt.Sprintf("artifacts: %s of job %s is still being uploaded; not in the workspace", m.Name, m.Job))
	}
	if len(ans.Artifacts) == 0 {
		return nil
	}
	base, err := a.baseURL()
	if err != nil {
		return err
	}
	for _, in := range ans.Artifacts {
		if msg := pipeline.CheckArtifactName(in.Name); msg != "" {
			return fmt.Errorf("artifact %q of job %s: its path %s", in.Name, in.Job, msg)
		}
		if in.Download == nil {
			return fmt.Errorf("artifact %q of job %s: the coordinator gave no download URL", in.Name, in.Job)
		}
		if err := insideWorkspace(ws, in.Name); err != nil {
			return fmt.Errorf("artifact %q of job %s: %w", in.Name, in.Job, err)
		}
		if _, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(in.Name))); err == nil {
			rec.System(fmt.Sprintf("artifacts: %s of job %s replaces the checked-out file of that name", in.Name, in.Job))
		}
		start := time.Now()
		if err := download(ctx, a.blobHTTP, base, in.Download.blob(), ws, in.Name, in.SHA256, in.Size, fs.FileMode(in.Mode)); err != nil {
			return fmt.Errorf("artifact %q of job %s: %w", in.Name, in.Job, err)
		}
		a.cfg.Metrics.ArtifactDownloaded(in.Size)
		rec.System(fmt.Sprintf("artifacts: fetched %s of job %s (%d bytes) in %s", in.Name, in.Job, in.Size, rate(in.Size, time.Since(start))))
	}
	return nil
}

// download writes a blob to ws/name through a temporary file, and renames it into place
// with its permission bits only once its size and digest match.
func download(ctx context.Context, c *http.Client, base *url.URL, s blob.Signed, ws, name, digest string, size int64, mode fs.FileMode) error {
	dst := filepath.Join(ws, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	resp, err := blob.Send(ctx, c, base, s, nil, 0)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".gantry-fetch-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, size+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != size || got != digest {
		return fmt.Errorf("download: got %d bytes with sha256 %s, want %d bytes with sha256 %s", n, got, size, digest)
	}
	if mode = mode.Perm(); mode == 0 {
		mode = 0o644
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
