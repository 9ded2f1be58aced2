package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
)

var _ executor.HomeCopier = (*session)(nil)

// stepHome is the HOME the job's steps get: the one the session gives them, or the
// one the image gives the job's user, which a step's env may not change for the
// agent's copies.
func (s *session) stepHome(ctx context.Context) (string, error) {
	s.mu.Lock()
	home := s.home
	if home == "" {
		home = s.userHome
	}
	s.mu.Unlock()
	if home != "" {
		return home, nil
	}
	code, out, err := s.execOnce(ctx, s.container, s.user, []string{"sh", "-c", `printf '%s' "$HOME"`}, apiTimeout)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, lastLines(out, 3))
	}
	if err != nil {
		return "", fmt.Errorf("find the steps' home in the job's container: %w", err)
	}
	home = strings.TrimSpace(out)
	if home == "" || !path.IsAbs(home) {
		return "", fmt.Errorf("the steps' HOME in the job's container is %q, not a directory's path", home)
	}
	s.mu.Lock()
	s.userHome = home
	s.mu.Unlock()
	return home, nil
}

// CopyToHome extracts r into the steps' home directory in the job's container, and
// gives what it extracted to the job's user.
func (s *session) CopyToHome(ctx context.Context, r io.Reader) error {
	home, err := s.stepHome(ctx)
	if err != nil {
		return err
	}
	// The engine's own change of owner (copyUIDGID) needs getent in the image: the
	// stream's top-level names are noted on the way, and given to the user after.
	var top []string
	pr, pw := io.Pipe()
	retarred := make(chan struct{})
	go func() {
		defer close(retarred)
		pw.CloseWithError(retar(r, pw, &top))
	}()
	_, err = s.d.cli.CopyToContainer(ctx, s.container, client.CopyToContainerOptions{DestinationPath: home, Content: pr})
	_ = pr.CloseWithError(errors.New("copy ended"))
	<-retarred
	if err != nil {
		return fmt.Errorf("copy into %s in the job's container: %w", home, err)
	}
	s.mu.Lock()
	owner := s.userOwner
	s.mu.Unlock()
	if owner == "" || len(top) == 0 {
		return nil
	}
	args := append([]string{"sh", "-c", `cd "$1" && shift && chown -R -h "$0" -- "$@"`, owner, home}, top...)
	code, out, err := s.execOnce(ctx, s.container, "0", args, apiTimeout)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, lastLines(out, 3))
	}
	if err != nil {
		return fmt.Errorf("give what was copied into %s to user %s: %w", home, s.job.User, err)
	}
	return nil
}

// retar copies the tar stream r to w, noting the top-level names of its entries.
func retar(r io.Reader, w io.Writer, top *[]string) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return err
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(path.Clean("/"+h.Name), "/"), "/")
		if name != "" && !seen[name] {
			seen[name] = true
			*top = append(*top, name)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

// CopyFromHome returns rel of the steps' home directory in the job's container as a tar
// stream.
func (s *session) CopyFromHome(ctx context.Context, rel string) (io.ReadCloser, error) {
	home, err := s.stepHome(ctx)
	if err != nil {
		return nil, err
	}
	src := path.Join(home, rel)
	if src != home && !strings.HasPrefix(src, strings.TrimSuffix(home, "/")+"/") {
		return nil, fmt.Errorf("%s is not inside the home directory %s", rel, home)
	}
	res, err := s.d.cli.CopyFromContainer(ctx, s.container, client.CopyFromContainerOptions{SourcePath: src})
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("%s in the job's container: %w", src, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("copy %s out of the job's container: %w", src, err)
	}
	return res.Content, nil
}
