package agent

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// Archive entries are named under one of these roots: the workspace, or the home
// directory of the step's user.
const (
	cacheWorkspaceRoot = "workspace"
	cacheHomeRoot      = "home"
)

// jobCache is one of a job's caches as the worker runs it.
type jobCache struct {
	jobID, token string
	spec         pipeline.Cache
	key          string // hashFiles computed; "" when it could not be
	// hit is set when the exact key was restored: nothing new to save.
	hit bool
	// matched is the key of the entry restored, exact or by a restore key; "" on a miss.
	matched string
	// lookupOnly asks restoreCache to find the entry without fetching it (an actions/cache
	// step's lookup-only).
	lookupOnly bool
}

// hashFiles is GitHub's hashFiles over the workspace: the SHA-256 of the SHA-256 digests
// of the regular files the patterns match, in the order of their paths; "" when none
// matches. A symlink counts as the file it leads to, if that is a regular file inside
// the workspace.
func hashFiles(ws string, patterns []string) (string, error) {
	root, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", err
	}
	var names []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if pipeline.MatchHashFiles(patterns, name) {
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("find files: %w", err)
	}
	sort.Strings(names)
	sum := sha256.New()
	n := 0
	for _, name := range names {
		p := filepath.Join(root, filepath.FromSlash(name))
		target, err := filepath.EvalSymlinks(p)
		if err != nil || (target != root && !strings.HasPrefix(target, root+string(filepath.Separator))) {
			continue // broken, or out of the workspace
		}
		if st, err := os.Stat(target); err != nil || !st.Mode().IsRegular() {
			continue
		}
		digest, _, _, err := hashFile(target)
		if err != nil {
			return "", err
		}
		raw, _ := hex.DecodeString(digest)
		sum.Write(raw)
		n++
	}
	if n == 0 {
		return "", nil
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// cacheHomeSuffix names the directory beside a container job's workspace that stands
// for its steps' home while its caches are restored and saved: a container's home is
// in the container, not on the worker's disk. What a restore puts there is copied into
// the container after it starts; the caches' paths under ~ are copied out of it into
// there after the last step, to be saved.
const cacheHomeSuffix = "-home"

// stepHome is the home directory a job's steps get: HOME as their environment has it,
// or for a job in a container the directory on the worker that stands for it.
func (a *Agent) stepHome(j claimedJob, ws string) string {
	if len(j.Spec.Steps) == 0 {
		return ""
	}
	if a.inContainer(j) {
		return ws + cacheHomeSuffix
	}
	home := ""
	for _, kv := range a.stepEnv(j, j.Spec.Steps[0], ws, true, nil, nil) {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	return home
}

// cacheRoot resolves a cache path to the directory it lies in (the workspace or home)
// and its slash-separated path there ("" for the directory itself).
func cacheRoot(p, ws, home string) (root, rootName, rel string, err error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home == "" {
			return "", "", "", errors.New("HOME is not set")
		}
		rel = strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/")
		return home, cacheHomeRoot, path.Clean("/" + rel)[1:], nil
	}
	return ws, cacheWorkspaceRoot, path.Clean(p), nil
}

// restoreCaches computes the keys of the job's caches and restores each from the newest
// matching entry. Nothing about a cache fails the job: what goes wrong is told in its
// log, and the steps run without it.
func (a *Agent) restoreCaches(ctx context.Context, log *slog.Logger, j claimedJob, ws string, rec *logs.Recorder) []*jobCache {
	var out []*jobCache
	home := a.stepHome(j, ws)
	for _, spec := range j.Spec.Caches {
		c := &jobCache{jobID: j.ID, token: j.Lease.Token, spec: spec}
		out = append(out, c)
		hash := func(ps []string) (string, error) { return hashFiles(ws, ps) }
		key, err := pipeline.ExpandCacheKey(spec.Key, hash)
		if err != nil {
			rec.System(fmt.Sprintf("cache: the key %s cannot be computed (%v); not restored or saved", spec.Key, err))
			continue
		}
		c.key = key
		var restoreKeys []string
		for _, rk := range spec.RestoreKeys {
			v, err := pipeline.ExpandCacheKey(rk, hash)
			if err != nil {
				rec.System(fmt.Sprintf("cache %s: the restore key %s cannot be computed (%v); skipped", key, rk, err))
				continue
			}
			if strings.TrimSpace(v) != "" {
				restoreKeys = append(restoreKeys, v)
			}
		}
		start := time.Now()
		if err := a.restoreCache(ctx, c, restoreKeys, ws, home, rec); err != nil {
			log.Warn("restore cache", "cache", key, "err", err)
			rec.System(fmt.Sprintf("cache %s: not restored: %v", key, err))
			continue
		}
		log.Debug("cache restore done", "cache", key, "hit", c.hit, "took", time.Since(start))
	}
	return out
}

type cacheHit struct {
	Key      string  `json:"key"`
	Scope    string  `json:"scope"`
	SHA256   string  `json:"sha256"`
	Size     int64   `json:"size"`
	Exact    bool    `json:"exact"`
	Download *signed `json:"download"`
}

func (a *Agent) restoreCache(ctx context.Context, c *jobCache, restoreKeys []string, ws, home string, rec *logs.Recorder) error {
	var ans struct {
		State  string    `json:"state"`
		Entry  *cacheHit `json:"entry"`
		Scopes []string  `json:"scopes"`
	}
	body := map[string]any{"key": c.key, "restore_keys": restoreKeys}
	if err := a.postLeased(ctx, c, "/restore", body, &ans); err != nil {
		return err
	}
	if ans.State == "off" {
		rec.System(fmt.Sprintf("cache %s: caches are off: the coordinator has no blob store", c.key))
		c.key = "" // nothing to save either
		return nil
	}
	if ans.Entry == nil {
		rec.System(fmt.Sprintf("cache %s: miss (no entry of this key%s in %s)", c.key, restoreKeysSaid(restoreKeys), strings.Join(ans.Scopes, ", ")))
		return nil
	}
	e := ans.Entry
	if c.lookupOnly {
		c.hit, c.matched = e.Exact, e.Key
		rec.System(fmt.Sprintf("cache %s: found %s in scope %s (%d bytes); not fetched: lookup only", c.key, e.Key, e.Scope, e.Size))
		return nil
	}
	if e.Download == nil || !blob.ValidDigest(e.SHA256) {
		return errors.New("the coordinator gave no download URL")
	}
	base, err := a.baseURL()
	if err != nil {
		return err
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(a.cfg.WorkDir, "gantry-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := download(ctx, a.blobHTTP, base, e.Download.blob(), tmp, "archive", e.SHA256, e.Size, 0o600); err != nil {
		return err
	}
	fetched := time.Since(start)
	files, err := extractCache(filepath.Join(tmp, "archive"), ws, home)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", e.Key, err)
	}
	c.hit, c.matched = e.Exact, e.Key
	how := "exact key"
	if !e.Exact {
		how = "restore key, partial"
	}
	rec.System(fmt.Sprintf("cache %s: hit (%s): restored %s from scope %s, %d bytes, %d %s, fetched in %s, unpacked in %s",
		c.key, how, e.Key, e.Scope, e.Size, files, plural(files, "entry", "entries"), rate(e.Size, fetched), (time.Since(start) - fetched).Round(time.Millisecond)))
	return nil
}

func restoreKeysSaid(rks []string) string {
	if len(rks) == 0 {
		return ""
	}
	return " or starting with " + strings.Join(rks, ", ")
}

// saveCaches saves those of the job's caches whose when takes the steps' outcome and
// whose exact key was not restored.
func (a *Agent) saveCaches(ctx context.Context, log *slog.Logger, j claimedJob, ws string, caches []*jobCache, status string, rec *logs.Recorder) {
	home := a.stepHome(j, ws)
	for _, c := range caches {
		switch {
		case c.key == "":
			continue
		case status != "success" && status != "failed":
			rec.System(fmt.Sprintf("cache %s: not saved: the job was %s", c.key, status))
			continue
		case !c.spec.When.SaveAfter(status == "success"):
			rec.System(fmt.Sprintf("cache %s: not saved: the job's steps %s and the cache is saved %s", c.key, outcomeSaid(status), whenSaid(c.spec.When)))
			continue
		case c.hit:
			rec.System(fmt.Sprintf("cache %s: not saved: restored from this exact key", c.key))
			continue
		}
		if err := a.saveCache(ctx, c, ws, home, rec); err != nil {
			log.Warn("save cache", "cache", c.key, "err", err)
			rec.System(fmt.Sprintf("cache %s: not saved: %v", c.key, err))
		}
	}
}

func outcomeSaid(status string) string {
	if status == "success" {
		return "succeeded"
	}
	return "failed"
}

func whenSaid(w pipeline.CacheWhen) string {
	switch w {
	case pipeline.CacheOnFailure:
		return "on failure only"
	case pipeline.CacheAlways:
		return "always"
	}
	return "on success only"
}

func (a *Agent) saveCache(ctx context.Context, c *jobCache, ws, home string, rec *logs.Recorder) error {
	start := time.Now()
	tmp, err := os.MkdirTemp(a.cfg.WorkDir, "gantry-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	archive := filepath.Join(tmp, "archive")
	files, digest, size, err := writeCache(archive, c.spec.Paths, ws, home, rec, c.key)
	if err != nil {
		return err
	}
	if files == 0 {
		rec.System(fmt.Sprintf("cache %s: not saved: none of its paths exists", c.key))
		return nil
	}
	packed := time.Since(start)
	body := map[string]any{"key": c.key, "sha256": digest, "size": size}
	var ans struct {
		State  string  `json:"state"`
		Scope  string  `json:"scope"`
		Upload *signed `json:"upload"`
	}
	if err := a.postLeased(ctx, c, "/save", body, &ans); err != nil {
		return err
	}
	switch ans.State {
	case "exists":
		rec.System(fmt.Sprintf("cache %s: not saved: scope %s has an entry of this key already", c.key, ans.Scope))
		return nil
	case "saved":
		rec.System(fmt.Sprintf("cache %s: saved in scope %s, %d bytes, %d %s, packed in %s (the blob store held the archive already)",
			c.key, ans.Scope, size, files, plural(files, "entry", "entries"), packed.Round(time.Millisecond)))
		return nil
	case "upload":
	default:
		return fmt.Errorf("the coordinator answered %q", ans.State)
	}
	if ans.Upload == nil {
		return errors.New("the coordinator gave no upload URL")
	}
	base, err := a.baseURL()
	if err != nil {
		return err
	}
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	upStart := time.Now()
	resp, err := blob.Send(ctx, a.blobHTTP, base, ans.Upload.blob(), f, size)
	f.Close()
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	uploaded := time.Since(upStart)
	if err := a.postLeased(ctx, c, "/commit", body, &ans); err != nil {
		return err
	}
	if ans.State == "exists" {
		rec.System(fmt.Sprintf("cache %s: not saved: another job saved this key in scope %s first", c.key, ans.Scope))
		return nil
	}
	rec.System(fmt.Sprintf("cache %s: saved in scope %s, %d bytes, %d %s, packed in %s, uploaded in %s",
		c.key, ans.Scope, size, files, plural(files, "entry", "entries"), packed.Round(time.Millisecond), rate(size, uploaded)))
	return nil
}

// cacheCallFor bounds how long a cache call is retried while the coordinator is
// unreachable or failing: a cache is worth a short wait, not a job's whole timeout.
const cacheCallFor = time.Minute

// postLeased posts a cache request of the job the cache belongs to.
func (a *Agent) postLeased(ctx context.Context, c *jobCache, op string, body map[string]any, out any) error {
	body["token"] = c.token
	ctx, stop := context.WithTimeout(ctx, cacheCallFor)
	defer stop()
	return a.retryPost(ctx, "/api/v1/agent/jobs/"+c.jobID+"/caches"+op, body, out)
}

// writeCache archives the cache's paths as a zstd-compressed tar into file, hashing it
// as it goes: directories, regular files and symlinks (kept as links) with their
// permission bits and modification times. It returns how many entries it holds, its
// SHA-256 and size.
func writeCache(file string, paths []string, ws, home string, rec *logs.Recorder, key string) (int, string, int64, error) {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	counted := &countWriter{w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(counted, 1<<20)
	zw, err := zstd.NewWriter(bw, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return 0, "", 0, err
	}
	tw := tar.NewWriter(zw)
	n := 0
	for _, p := range paths {
		root, rootName, rel, err := cacheRoot(p, ws, home)
		if err != nil {
			rec.System(fmt.Sprintf("cache %s: %s is not kept: %v", key, p, err))
			continue
		}
		start := filepath.Join(root, filepath.FromSlash(rel))
		if _, err := os.Lstat(start); errors.Is(err, fs.ErrNotExist) {
			rec.System(fmt.Sprintf("cache %s: %s does not exist; not kept", key, p))
			continue
		}
		written, err := tarTree(tw, root, start, func(rel string) string {
			return rootName + "/" + filepath.ToSlash(rel)
		})
		n += written
		if err != nil {
			return 0, "", 0, fmt.Errorf("archive %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return 0, "", 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, "", 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, "", 0, err
	}
	if err := f.Close(); err != nil {
		return 0, "", 0, err
	}
	return n, hex.EncodeToString(h.Sum(nil)), counted.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	gzipMagic = []byte{0x1f, 0x8b}
)

// extractCache unpacks an archive (zstd- or gzip-compressed tar) into the workspace and
// the home directory. Every entry is written through an os.Root of its directory, so
// neither a name with .. nor a symlink, from the archive or already on disk, leads out
// of it. What is in the way of an entry is replaced.
func extractCache(file, ws, home string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	head, _ := br.Peek(4)
	var r io.Reader
	switch {
	case bytes.HasPrefix(head, zstdMagic):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return 0, err
		}
		defer zr.Close()
		r = zr
	case bytes.HasPrefix(head, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return 0, err
		}
		defer zr.Close()
		r = zr
	default:
		return 0, errors.New("not a zstd or gzip archive")
	}
	return extractTar(r, ws, home, nil)
}

// extractTar extracts a cache's tar stream: its entries are named under "workspace/"
// and "home/" (after rename, when not nil), which are ws and home.
func extractTar(r io.Reader, ws, home string, rename func(string) string) (int, error) {
	roots := map[string]*os.Root{}
	defer func() {
		for _, root := range roots {
			root.Close()
		}
	}()
	open := func(name string) (*os.Root, error) {
		if root := roots[name]; root != nil {
			return root, nil
		}
		dir := ws
		if name == cacheHomeRoot {
			if home == "" {
				return nil, errors.New("the archive holds files of the home directory, and HOME is not set")
			}
			if err := os.MkdirAll(home, 0o755); err != nil {
				return nil, err
			}
			dir = home
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, err
		}
		roots[name] = root
		return root, nil
	}
	type dirTime struct {
		root *os.Root
		name string
		t    time.Time
	}
	var dirs []dirTime
	tr := tar.NewReader(r)
	n := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
		if rename != nil {
			hdr.Name = rename(hdr.Name)
		}
		rootName, rel, ok := strings.Cut(strings.TrimSuffix(hdr.Name, "/"), "/")
		if !ok && (rootName == cacheWorkspaceRoot || rootName == cacheHomeRoot) {
			rel = "." // the root itself, as ~ saves it
		}
		if (rootName != cacheWorkspaceRoot && rootName != cacheHomeRoot) || rel == "" || path.Clean(rel) != rel ||
			rel == ".." || strings.HasPrefix(rel, "../") || strings.HasPrefix(rel, "/") {
			return n, fmt.Errorf("entry %q is not inside the workspace or home directory", hdr.Name)
		}
		root, err := open(rootName)
		if err != nil {
			return n, err
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		if dir := path.Dir(rel); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return n, err
			}
		}
		existing, lerr := root.Lstat(rel)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if lerr == nil && !existing.IsDir() {
				if err := root.Remove(rel); err != nil {
					return n, err
				}
			}
			if rel != "." {
				if err := root.MkdirAll(rel, 0o755); err != nil {
					return n, err
				}
			}
			if err := root.Chmod(rel, mode|0o700); err != nil {
				return n, err
			}
			dirs = append(dirs, dirTime{root, rel, hdr.ModTime})
		case tar.TypeReg:
			if lerr == nil {
				if err := root.RemoveAll(rel); err != nil {
					return n, err
				}
			}
			out, err := root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return n, err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return n, err
			}
			if err := root.Chmod(rel, mode); err != nil {
				return n, err
			}
			if err := root.Chtimes(rel, hdr.ModTime, hdr.ModTime); err != nil {
				return n, err
			}
		case tar.TypeSymlink:
			if lerr == nil {
				if err := root.RemoveAll(rel); err != nil {
					return n, err
				}
			}
			if err := root.Symlink(hdr.Linkname, rel); err != nil {
				return n, err
			}
		default:
			continue // nothing else is saved
		}
		n++
	}
	// Directories last, as the files written into them moved their times.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = dirs[i].root.Chtimes(dirs[i].name, dirs[i].t, dirs[i].t)
	}
	return n, nil
}
