package agent

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/logs"
)

// copyHomeIn copies what the job's caches restored under ~ (into home, on the worker)
// into the home of the steps in the job's container, and returns the session to copy
// the caches' paths back out of; nil when the session cannot.
func (a *Agent) copyHomeIn(ctx context.Context, log *slog.Logger, rec *logs.Recorder, sess executor.Session, home string) executor.HomeCopier {
	hc, ok := sess.(executor.HomeCopier)
	entries, _ := os.ReadDir(home)
	if !ok {
		if len(entries) > 0 {
			rec.System("cache: what was restored under ~ is not in the job's home: this worker's environments take no files into it")
		}
		// Nor is anything saved from there: what is there is not what the steps made.
		_ = os.RemoveAll(home)
		return nil
	}
	if len(entries) == 0 {
		return hc
	}
	pr, pw := io.Pipe()
	tarred := make(chan struct{})
	go func() {
		defer close(tarred)
		pw.CloseWithError(tarDir(pw, home))
	}()
	err := hc.CopyToHome(ctx, pr)
	_ = pr.CloseWithError(errors.New("copy ended"))
	<-tarred
	if err != nil {
		log.Warn("copy the restored caches into the container's home", "err", err)
		rec.System("cache: what was restored under ~ could not be put in the job's home: " + err.Error())
	}
	return hc
}

// copyHomeOut copies the paths under ~ of the caches the job saves with status out of
// the container's home into home on the worker (emptied first), where saveCaches
// reads them.
func (a *Agent) copyHomeOut(ctx context.Context, log *slog.Logger, rec *logs.Recorder, hc executor.HomeCopier, home string, caches []*jobCache, status string) {
	var rels []string
	for _, c := range caches {
		if c.key == "" || c.hit || !c.spec.When.SaveAfter(status == "success") {
			continue
		}
		for _, p := range c.spec.Paths {
			_, rootName, rel, err := cacheRoot(p, "", home)
			if err == nil && rootName == cacheHomeRoot && !slices.Contains(rels, rel) {
				rels = append(rels, rel)
			}
		}
	}
	if len(rels) == 0 {
		return
	}
	if err := os.RemoveAll(home); err != nil {
		rec.System("cache: the paths under ~ are not kept: " + err.Error())
		return
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		rec.System("cache: the paths under ~ are not kept: " + err.Error())
		return
	}
	for _, rel := range rels {
		rc, err := hc.CopyFromHome(ctx, rel)
		if errors.Is(err, fs.ErrNotExist) {
			continue // saveCaches says it does not exist
		}
		if err != nil {
			log.Warn("copy a cache path out of the container's home", "path", rel, "err", err)
			rec.System(fmt.Sprintf("cache: ~/%s could not be copied out of the job's home: %v", rel, err))
			continue
		}
		_, err = extractTar(rc, "", home, homeEntryName(rel))
		rc.Close()
		if err != nil {
			log.Warn("copy a cache path out of the container's home", "path", rel, "err", err)
			rec.System(fmt.Sprintf("cache: ~/%s could not be copied out of the job's home: %v", rel, err))
		}
	}
}

// homeEntryName names an entry of a copy of rel out of a container's home (named under
// rel's last element) as a cache archive's entry under "home/".
func homeEntryName(rel string) func(string) string {
	return func(name string) string {
		_, rest, _ := strings.Cut(strings.TrimPrefix(name, "./"), "/")
		if rel == "" {
			return path.Join(cacheHomeRoot, rest)
		}
		return path.Join(cacheHomeRoot, rel, rest)
	}
}

// tarDir writes dir's directories, regular files and symlinks as a tar stream, named
// relative to dir.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	_, err := tarTree(tw, dir, dir, func(rel string) string {
		if rel == "." {
			return "" // dir itself
		}
		return filepath.ToSlash(rel)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// tarTree writes the directories, regular files and symlinks under start to tw, each
// named name(its path relative to root), or left out where name gives ""; sockets,
// devices and pipes are not kept. Owners are not kept either: what a job made is
// restored as whoever restores it. It returns how many entries it wrote.
func tarTree(tw *tar.Writer, root, start string, name func(rel string) string) (int, error) {
	n := 0
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		entry := name(rel)
		if entry == "" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case d.IsDir(), d.Type().IsRegular():
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = entry
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		n++
		if !d.Type().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		if _, err := io.CopyN(tw, src, hdr.Size); err != nil {
			return fmt.Errorf("%s changed while it was archived: %w", p, err)
		}
		return nil
	})
	return n, err
}
