package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// User is an account steps run as instead of the worker's own, so that a step cannot
// read what only the worker may (its credentials, its memory, other jobs' files).
type User struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups
}

// LookupUser finds the account named name (or a numeric uid). It fails when there is
// no such account: running steps as an unknown user would be running them as nobody
// in particular.
func LookupUser(name string) (*User, error) {
	if name == "" {
		return nil, errors.New("look up step user: empty name")
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if _, numErr := strconv.ParseUint(name, 10, 32); numErr == nil && errors.As(err, &unknown) {
			u, err = user.LookupId(name)
		}
		if err != nil {
			return nil, fmt.Errorf("look up step user %q: %w", name, err)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("look up step user %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("look up step user %q: gid %q: %w", name, u.Gid, err)
	}
	out := &User{Name: u.Username, UID: uint32(uid), GID: uint32(gid)}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("look up the groups of step user %q: %w", name, err)
	}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("look up the groups of step user %q: gid %q: %w", name, id, err)
		}
		out.Groups = append(out.Groups, uint32(g))
	}
	return out, nil
}

// credential is what the step's process is started with. Groups is never nil, so
// that the worker's own supplementary groups (root's, often) are dropped.
func (u *User) credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: append([]uint32{}, u.Groups...)}
}

// Own gives the user the tree at dir, so that its steps can write their workspace.
// Symbolic links are changed themselves, never what they point to.
func (u *User) Own(dir string) error {
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(u.UID), int(u.GID))
	})
	if err != nil {
		return fmt.Errorf("give %s to step user %s: %w", dir, u.Name, err)
	}
	return nil
}

// PrepareWorkspace gives the workspace dir to the step user, if there is one.
func (sh Shell) PrepareWorkspace(dir string) error { return prepareWorkspace(sh.User, dir) }

// PrepareWorkspace gives the workspace dir to the step user (StepUser), if there is one.
func (sb Sandbox) PrepareWorkspace(dir string) error { return prepareWorkspace(sb.StepUser(), dir) }

func prepareWorkspace(u *User, dir string) error {
	if u == nil {
		return nil
	}
	return u.Own(dir)
}

// CanReach reports, as an error naming the first directory in the way, whether the
// user may pass through every directory down to dir, as its steps must to reach
// their workspaces there.
func (u *User) CanReach(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", dir, err)
	}
	p := "/"
	for _, part := range append([]string{""}, strings.Split(strings.TrimPrefix(abs, "/"), "/")...) {
		p = filepath.Join(p, part)
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("step user %s cannot reach %s: %w", u.Name, dir, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil // no owner to check against on this platform
		}
		var bit os.FileMode = 0o001
		switch {
		case st.Uid == u.UID:
			bit = 0o100
		case st.Gid == u.GID || slices.Contains(u.Groups, st.Gid):
			bit = 0o010
		}
		if fi.Mode().Perm()&bit == 0 {
			return fmt.Errorf("step user %s cannot reach %s: %s is mode %#o, owner %d, group %d (chmod o+x would let it through)",
				u.Name, dir, p, uint32(fi.Mode().Perm()), st.Uid, st.Gid)
		}
	}
	return nil
}
