package pipeline

import (
	"fmt"
	"path"
	"strings"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// UsesKind says where a step's action comes from.
type UsesKind int

const (
	// UsesRepository is owner/repo[/dir]@ref: a directory of a git repository at a ref.
	UsesRepository UsesKind = iota + 1
	// UsesLocal is ./dir: a directory of the job's workspace.
	UsesLocal
	// UsesDocker is docker://image: a container image run as the step.
	UsesDocker
	// UsesSelf is $/dir: a directory of the run's own repository at the commit the run
	// is for, whatever the workspace holds.
	UsesSelf
)

// Uses is a step's uses: taken apart.
type Uses struct {
	Kind UsesKind
	// Owner, Repo, Dir and Ref name a repository's action: Dir is "" for the
	// repository's root.
	Owner, Repo, Dir, Ref string
	// Local is the workspace directory of a local action, cleaned, without "./", or the
	// repository's directory of a $/ one, without "$/".
	Local string
	// Image is a docker:// step's image.
	Image string
}

// Repository is owner/repo.
func (u Uses) Repository() string { return u.Owner + "/" + u.Repo }

// String writes u back as uses: text.
func (u Uses) String() string {
	switch u.Kind {
	case UsesLocal:
		return "./" + u.Local
	case UsesSelf:
		return "$/" + u.Local
	case UsesDocker:
		return "docker://" + u.Image
	}
	s := u.Owner + "/" + u.Repo
	if u.Dir != "" {
		s += "/" + u.Dir
	}
	return s + "@" + u.Ref
}

var (
	usesOwner = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	usesRef   = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_./+-]*$`)
)

// ParseUses reads a step's uses: text as GitHub does: owner/repo@ref,
// owner/repo/dir@ref, ./dir (or ../dir, which is refused), $/dir (the run's own
// repository at its commit), docker://image.
func ParseUses(s string) (Uses, error) {
	switch {
	case s == "":
		return Uses{}, fmt.Errorf("uses is empty: name an action, as in owner/repo@v1")
	case strings.HasPrefix(s, "docker://"):
		img := strings.TrimPrefix(s, "docker://")
		if img == "" || strings.ContainsAny(img, " \t\n") {
			return Uses{}, fmt.Errorf("uses %q: docker:// needs an image, as in docker://alpine:3.20", s)
		}
		return Uses{Kind: UsesDocker, Image: img}, nil
	case strings.HasPrefix(s, "./") || s == ".":
		dir := path.Clean(s)
		if dir == ".." || strings.HasPrefix(dir, "../") {
			return Uses{}, fmt.Errorf("uses %q: a local action must be inside the workspace", s)
		}
		if dir == "." {
			dir = ""
		}
		return Uses{Kind: UsesLocal, Local: dir}, nil
	case strings.HasPrefix(s, "$/"):
		dir := path.Clean(strings.TrimPrefix(s, "$/"))
		if dir == ".." || strings.HasPrefix(dir, "../") || strings.HasPrefix(dir, "/") || strings.Contains(s, "${{") {
			return Uses{}, fmt.Errorf("uses %q: $/dir names a directory of the run's own repository", s)
		}
		if dir == "." {
			dir = ""
		}
		return Uses{Kind: UsesSelf, Local: dir}, nil
	case strings.HasPrefix(s, "../") || strings.HasPrefix(s, "/"):
		return Uses{}, fmt.Errorf("uses %q: a local action is a directory of the workspace, written ./dir", s)
	}
	name, ref, ok := strings.Cut(s, "@")
	if !ok || ref == "" {
		return Uses{}, fmt.Errorf("uses %q: an action needs a version after @, as in %s@v1", s, s)
	}
	if strings.Contains(ref, "${{") || strings.Contains(name, "${{") {
		return Uses{}, fmt.Errorf("uses %q: an action's name and version cannot be expressions", s)
	}
	if !usesRef.MatchString(ref) || strings.Contains(ref, "..") {
		return Uses{}, fmt.Errorf("uses %q: %q is not a git ref", s, ref)
	}
	parts := strings.Split(name, "/")
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return Uses{}, fmt.Errorf("uses %q: expected owner/repo@ref, owner/repo/dir@ref, ./dir or docker://image", s)
	}
	for _, p := range parts[:2] {
		if !usesOwner.MatchString(p) || p == "." || p == ".." {
			return Uses{}, fmt.Errorf("uses %q: %q is not an owner or repository name", s, p)
		}
	}
	u := Uses{Kind: UsesRepository, Owner: parts[0], Repo: parts[1], Ref: ref}
	if len(parts) > 2 {
		dir := path.Clean(strings.Join(parts[2:], "/"))
		if dir == "." || dir == ".." || strings.HasPrefix(dir, "../") || strings.HasPrefix(dir, "/") {
			return Uses{}, fmt.Errorf("uses %q: the action's directory must be inside its repository", s)
		}
		u.Dir = dir
	}
	return u, nil
}

// CheckUses reports what is wrong with a step's uses: text, or nil.
func CheckUses(s string) error {
	_, err := ParseUses(s)
	return err
}

// Actions the worker does itself, as steps at their place, with no code fetched
// (Uses.NativeAction).
const (
	NativeCheckout     = "checkout"
	NativeCache        = "cache"
	NativeCacheRestore = "cache/restore"
	NativeCacheSave    = "cache/save"
	NativeUpload       = "upload-artifact"
	NativeDownload     = "download-artifact"
	NativeSetupGo      = "setup-go"
	NativeSetupNode    = "setup-node"
	NativeSetupPython  = "setup-python"
	// NativeTestReport is Gantry's own gantry/test-report (TestReportAction), which
	// names test reports of its job.
	NativeTestReport = TestReportAction
)

// NativeAction names what the worker does itself for the action, or "" when it runs the
// action's own code: actions/checkout (another ref or repository, a second checkout),
// actions/cache with its restore and save, actions/upload-artifact and
// download-artifact, where a workflow's step needs them at its place rather than as
// settings of the job; actions/setup-go, setup-node and setup-python, which find a
// toolchain installed; and Gantry's own gantry/test-report, which no repository holds.
func (u Uses) NativeAction() string {
	if u.IsTestReport() {
		return NativeTestReport
	}
	if u.Kind != UsesRepository || !strings.EqualFold(u.Owner, "actions") {
		return ""
	}
	name := strings.ToLower(u.Repo)
	if u.Dir != "" {
		name += "/" + strings.ToLower(u.Dir)
	}
	switch name {
	case NativeCheckout, NativeCache, NativeCacheRestore, NativeCacheSave, NativeUpload, NativeDownload,
		NativeSetupGo, NativeSetupNode, NativeSetupPython:
		return name
	}
	return ""
}

// NativeStep says whether the worker does what the action does itself (NativeAction).
func (u Uses) NativeStep() bool { return u.NativeAction() != "" }
