// Package dockertest gives tests a Docker Engine client and images built on the spot,
// FROM scratch, around the host's static busybox: no registry is needed. A test fails,
// never skips, when no engine is reachable or busybox-static is missing.
package dockertest

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Busybox is the name of the default test image.
const Busybox = "gantry-test/busybox:1"

// BusyboxPath is where the static busybox the images are built from is installed
// (Debian's busybox-static).
const BusyboxPath = "/bin/busybox"

// labelContent carries the hash of what an image was built from, so that a test
// rebuilds it only when that changed.
const labelContent = "gantry.test.content"

// Client connects to the engine (DOCKER_HOST or the default socket), failing the test
// when none answers. The client is closed when the test ends.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatalf("no Docker Engine reachable at %s: %v (start dockerd; .ci/run does)", cli.DaemonHost(), err)
	}
	return cli
}

// Spec describes a test image.
type Spec struct {
	// Name is the image's NAME:TAG; the file /etc/gantry-image in it holds that name, so
	// two names are two distinct images.
	Name string
	// Files are extra regular files (path: content) in the image; a script ("#!") or an
	// executable (ELF) is made executable.
	Files map[string]string
	// Volumes are the image's VOLUME paths.
	Volumes []string
	// Omit leaves these applets' links out ("bin/sh" makes an image without a shell).
	Omit []string
	// Path is the image's ENV PATH; "" is the usual one
	// (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin).
	Path string
	// Cmd is the image's CMD; nil is ["sh"].
	Cmd []string
}

var (
	buildMu sync.Mutex
	built   = map[string]string{} // name -> content hash built by this process
)

// Image makes sure the busybox image name exists and returns name. It is idempotent
// and cheap once the image is there: the image is rebuilt only when its content
// changed.
func Image(t testing.TB, name string) string {
	t.Helper()
	return Build(t, Spec{Name: name})
}

// Build makes sure the image spec describes exists and returns its name. The image
// holds busybox and its applets, /bin/bash (busybox's sh, which knows -o pipefail),
// /etc/passwd with root and user "gantry" (uid 1000), /tmp, and spec's files.
func Build(t testing.TB, spec Spec) string {
	t.Helper()
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatalf("the docker test images need a static busybox at %s (Debian busybox-static; make deps installs it): %v", BusyboxPath, err)
	}
	applets, err := exec.Command(BusyboxPath, "--list-full").Output()
	if err != nil {
		t.Fatalf("%s --list-full: %v", BusyboxPath, err)
	}
	files := map[string]string{
		"etc/gantry-image": spec.Name + "\n",
		"etc/passwd":       "root:x:0:0:root:/root:/bin/sh\ngantry:x:1000:1000:gantry:/home/gantry:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":        "root:x:0:\ngantry:x:1000:\nnogroup:x:65534:\n",
		"bin/bash":         "#!/bin/sh\nexec /bin/sh \"$@\"\n",
	}
	for p, c := range spec.Files {
		files[strings.TrimPrefix(p, "/")] = c
	}
	h := sha256.New()
	h.Write(bb)
	h.Write(applets)
	for _, p := range sortedKeys(files) {
		fmt.Fprintf(h, "%s\x00%s\x00", p, files[p])
	}
	vols := append([]string{}, spec.Volumes...)
	sort.Strings(vols)
	fmt.Fprintf(h, "%q", vols)
	omit := map[string]bool{}
	for _, p := range spec.Omit {
		omit[strings.TrimPrefix(p, "/")] = true
	}
	fmt.Fprintf(h, "%q", sortedKeys(boolKeys(omit)))
	if spec.Path != "" {
		fmt.Fprintf(h, "PATH=%q", spec.Path) // only then, so that other images keep their hash
	}
	if spec.Cmd != nil {
		fmt.Fprintf(h, "CMD=%q", spec.Cmd) // likewise
	}
	path := cmp.Or(spec.Path, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	cmd := `["sh"]`
	if spec.Cmd != nil {
		b, err := json.Marshal(spec.Cmd)
		if err != nil {
			t.Fatal(err)
		}
		cmd = string(b)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]

	buildMu.Lock()
	defer buildMu.Unlock()
	if built[spec.Name] == sum {
		return spec.Name
	}
	cli := Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if got, err := cli.ImageInspect(ctx, spec.Name); err == nil && got.Config != nil && got.Config.Labels[labelContent] == sum {
		built[spec.Name] = sum
		return spec.Name
	} else if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatalf("inspect image %s: %v", spec.Name, err)
	}

	var links []string
	for _, a := range strings.Fields(string(applets)) {
		if !omit[strings.TrimPrefix(a, "/")] {
			links = append(links, a)
		}
	}
	rootfs, err := rootfsTar(bb, links, files)
	if err != nil {
		t.Fatalf("make the rootfs of %s: %v", spec.Name, err)
	}
	changes := []string{
		"ENV PATH=" + path,
		"CMD " + cmd,
		"LABEL " + labelContent + "=" + sum,
	}
	for _, v := range vols {
		changes = append(changes, fmt.Sprintf("VOLUME %q", v))
	}
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, spec.Name,
		client.ImageImportOptions{Changes: changes})
	if err != nil {
		t.Fatalf("import image %s: %v", spec.Name, err)
	}
	defer res.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(res)
	if got, err := cli.ImageInspect(ctx, spec.Name); err != nil || got.Config == nil || got.Config.Labels[labelContent] != sum {
		t.Fatalf("image %s after import: %v; import said %s", spec.Name, err, out.String())
	}
	built[spec.Name] = sum
	return spec.Name
}

func boolKeys(m map[string]bool) map[string]string {
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = ""
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// rootfsTar lays out a root filesystem: busybox at /bin/busybox, a symlink per applet,
// and files.
func rootfsTar(busybox []byte, applets []string, files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	dirs := map[string]bool{}
	var mkdir func(string) error
	mkdir = func(d string) error {
		if d == "" || d == "." || dirs[d] {
			return nil
		}
		if i := strings.LastIndexByte(d, '/'); i > 0 {
			if err := mkdir(d[:i]); err != nil {
				return err
			}
		}
		dirs[d] = true
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: mtime})
	}
	parent := func(p string) string {
		if i := strings.LastIndexByte(p, '/'); i > 0 {
			return p[:i]
		}
		return ""
	}
	for _, d := range []string{"tmp", "root", "home/gantry", "proc", "sys", "dev", "etc", "bin", "workspace"} {
		if err := mkdir(d); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(busybox)), ModTime: mtime}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(busybox); err != nil {
		return nil, err
	}
	seen := map[string]bool{"bin/busybox": true}
	for p := range files {
		seen[p] = true
	}
	for _, a := range applets {
		a = strings.TrimPrefix(a, "/")
		if seen[a] {
			continue
		}
		seen[a] = true
		if err := mkdir(parent(a)); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: "/bin/busybox", Mode: 0o777, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	for _, p := range sortedKeys(files) {
		if err := mkdir(parent(p)); err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if strings.HasPrefix(files[p], "#!") || strings.HasPrefix(files[p], "\x7fELF") {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(files[p])), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[p])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// PrivProbe builds privprobe (the command in ./privprobe) static, for the host and for
// the test images, and returns its path, in a directory of the test's. The directory
// and the file are mode 0755: tests make the file set-user-ID root, or give it file
// capabilities, and run it as other users.
func PrivProbe(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("build privprobe: %v", err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := dir + "/privprobe"
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", out, "github.com/gantry-ci/gantry/internal/executor/docker/dockertest/privprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build privprobe: %v: %s", err, b)
	}
	return out
}

// PrivProbeImage makes sure the image name exists, as Build makes one, with privprobe at
// /bin/privprobe, and returns name.
func PrivProbeImage(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(PrivProbe(t))
	if err != nil {
		t.Fatal(err)
	}
	return Build(t, Spec{Name: name, Files: map[string]string{"bin/privprobe": string(b)}})
}

// Leftovers lists the containers, networks and volumes labelled with workerID, as
// "kind name".
func Leftovers(t testing.TB, cli *client.Client, workerID string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", "gantry.worker="+workerID)
	var out []string
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	for _, c := range cs.Items {
		out = append(out, "container "+strings.Join(c.Names, ","))
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list networks: %v", err)
	}
	for _, n := range ns.Items {
		out = append(out, "network "+n.Name)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list volumes: %v", err)
	}
	for _, v := range vs.Items {
		out = append(out, "volume "+v.Name)
	}
	return out
}

// NoLeftovers registers a check, run when the test ends, that nothing labelled with
// workerID is left on the engine; whatever is left is removed so later tests start
// clean.
func NoLeftovers(t testing.TB, cli *client.Client, workerID string) {
	t.Helper()
	t.Cleanup(func() {
		left := Leftovers(t, cli, workerID)
		if len(left) == 0 {
			return
		}
		t.Errorf("left on the engine by worker %s: %v", workerID, left)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		f := client.Filters{}.Add("label", "gantry.worker="+workerID)
		if cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
			for _, c := range cs.Items {
				_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
		if ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
			for _, n := range ns.Items {
				_, _ = cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
		if vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f}); err == nil {
			for _, v := range vs.Items {
				_, _ = cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
			}
		}
	})
}
