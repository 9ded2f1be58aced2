package pipeline

import (
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// DockerLabel is the capability a worker with the docker executor carries as a label. A
// job with an image asks for it (the planner adds it to runs_on), so that only such a
// worker claims the job.
const DockerLabel = "docker"

// PrivilegedLabel is the capability a worker carries whose operator lets its jobs have a
// privileged container (gantry worker --executor docker --docker-allow-privileged). A job
// with container.options.privileged asks for it beside DockerLabel, so that it waits
// for such a worker rather than fail on another.
const PrivilegedLabel = "docker-privileged"

// Container is how a job's container runs, after defaults.
type Container struct {
	// User runs the steps as that user of the image; "" is the image's own.
	User       string `json:"user,omitempty"`
	Privileged bool   `json:"privileged,omitempty"`
	// Pull is always, if-not-present or never; "" is if-not-present.
	Pull string `json:"pull,omitempty"`
	// Credentials log in to the registry of the job's images. Username and Password
	// may hold ${{ secrets.NAME }}, resolved only by the worker that claims the job.
	Credentials *RegistryCredentials `json:"credentials,omitempty"`
}

// RegistryCredentials are a user name and password (or token) for an image registry.
type RegistryCredentials struct {
	// Registry is the registry's host ("docker.io" for images without one); "" is the
	// registry of the job's image.
	Registry string `json:"registry,omitempty"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// Service is a container started for a job before its first step: beside the job's own
// container, reachable from it by Name, or, for a job without an image, with its Ports
// published on the worker's loopback.
type Service struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// Env may hold ${{ secrets.NAME }}, as a job's env may.
	Env map[string]string `json:"env,omitempty"`
	// Command replaces the image's command when not empty.
	Command []string `json:"command,omitempty"`
	// Ports are container ports ("5432", "53/udp"); for a job without an image each
	// may name the port of the worker's 127.0.0.1 it is published at ("15432:5432"),
	// and one that does not is published at a free port.
	Ports       []string     `json:"ports,omitempty"`
	Healthcheck *Healthcheck `json:"healthcheck,omitempty"`
}

// Healthcheck is a command run in a service's container, every Interval, until it exits
// 0; the job's steps start only then. Retries failures in a row fail the job.
type Healthcheck struct {
	Command  []string `json:"command"`
	Interval Duration `json:"interval"`
	Timeout  Duration `json:"timeout"`
	Retries  int      `json:"retries"`
}

// Healthcheck defaults: a service is given about a minute to come up.
const (
	DefaultHealthInterval = time.Second
	DefaultHealthTimeout  = 5 * time.Second
	DefaultHealthRetries  = 60
)

// Pull policies.
const (
	PullAlways       = "always"
	PullIfNotPresent = "if-not-present"
	PullNever        = "never"
)

var (
	containerKeys   = []string{"user", "options", "pull", "credentials"}
	optionKeys      = []string{"privileged"}
	credentialKeys  = []string{"registry", "username", "password"}
	serviceKeys     = []string{"image", "env", "command", "ports", "healthcheck"}
	healthcheckKeys = []string{"command", "interval", "timeout", "retries"}
	pullPolicies    = []string{PullAlways, PullIfNotPresent, PullNever}
)

// containerSpec is a container: setting as written; each key left out is nil, so a job's
// keys layer over those of defaults one by one.
type containerSpec struct {
	set         bool
	node        *yaml.Node
	path        string
	user        *text
	privileged  *bool
	pull        *string
	credentials *credentialSpec
}

type credentialSpec struct {
	registry, username, password text
}

type serviceSpec struct {
	name        string
	key         *yaml.Node
	path        string
	image       text
	env         []envVar
	command     []text
	commandSet  bool
	ports       []text
	healthcheck *healthcheckSpec
}

type healthcheckSpec struct {
	command           []text
	interval, timeout *time.Duration
	retries           *int
}

// serviceNamePattern is a host name label: the name the job's steps reach a service by.
var serviceNamePattern = lazyre.New(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Image references, as the Docker Engine and registries read them: an optional registry
// host (it holds a '.' or a ':', or is localhost), path components of lower-case letters
// and digits joined by '.', '_', '__' or dashes, then a tag and/or a sha256 digest.
var (
	registryPattern = lazyre.New(`^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?$`)
	imageRefPattern = lazyre.New(`^` +
		`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
		`(?::[\w][\w.-]{0,127})?` +
		`(?:@sha256:[a-f0-9]{64})?$`)
	portPattern = lazyre.New(`^(?:([0-9]{1,5}):)?([0-9]{1,5})(?:/(tcp|udp|sctp))?$`)
)

// CheckImageRef says what is wrong with an image reference, or "" when it is one.
func CheckImageRef(ref string) string {
	switch {
	case strings.TrimSpace(ref) == "":
		return "is empty"
	case len(ref) > 512:
		return "is longer than 512 characters"
	case strings.ContainsAny(ref, " \t\r\n"):
		return "holds white space"
	case strings.Contains(ref, "://"):
		return "is a URL; write the registry host without a scheme, as registry.example.com/team/go:1.26"
	}
	rest := ref
	if i := strings.IndexByte(ref, '/'); i > 0 && isRegistryHost(ref[:i]) {
		if !registryPattern.MatchString(ref[:i]) {
			return "names the registry host " + strconv.Quote(ref[:i]) + ", which is not a host name with an optional :port"
		}
		rest = ref[i+1:]
	}
	if imageRefPattern.MatchString(rest) {
		return ""
	}
	if i := strings.IndexByte(ref, '@'); i >= 0 && !strings.HasPrefix(ref[i+1:], "sha256:") {
		return "has a digest that is not sha256:<64 hex digits>"
	}
	name := ref
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.IndexByte(name, '/'); i > 0 && isRegistryHost(name[:i]) {
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	if strings.ContainsAny(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		return "must name its repository in lower case"
	}
	return "is not an image reference; expected NAME[:TAG] or NAME@sha256:DIGEST, as golang:1.26 or registry.example.com/team/go:1.26"
}

func isRegistryHost(s string) bool {
	return strings.ContainsAny(s, ".:") || s == "localhost"
}

// ImageRegistry is the registry host an image is pulled from: the reference's own host,
// or docker.io when it names none.
func ImageRegistry(ref string) string {
	if i := strings.IndexByte(ref, '/'); i > 0 && isRegistryHost(ref[:i]) {
		return ref[:i]
	}
	return "docker.io"
}

// image decodes an image: value (it may hold ${{ matrix.X }}, checked once put in); nil
// when it is not valid.
func (d *decoder) image(n *yaml.Node, p string) *text {
	v, ok := d.str(n, p, "an image reference")
	if !ok {
		return nil
	}
	t := text{v: v, node: d.resolve(n), path: p}
	if !strings.Contains(v, "${{") {
		if msg := CheckImageRef(v); msg != "" {
			d.add(ErrInvalid, t.node, p, "image %q %s", v, msg)
			return nil
		}
	}
	return &t
}

// container decodes container: {user, options: {privileged}, pull, credentials}.
func (d *decoder) container(c *containerSpec, n *yaml.Node, p string) {
	c.set, c.node, c.path = true, d.resolve(n), p
	d.object(n, p, "container", containerKeys, func(f field) {
		switch f.key {
		case "user":
			if v, ok := d.str(f.val, f.path, "a user name or uid[:gid]"); ok {
				if strings.TrimSpace(v) == "" || strings.ContainsAny(v, " \t\r\n") {
					d.add(ErrInvalid, f.val, f.path, "user %q: expected a user name or uid[:gid] without spaces; leave user out to use the image's", v)
					return
				}
				c.user = &text{v: v, node: d.resolve(f.val), path: f.path}
			}
		case "options":
			d.object(f.val, f.path, "container options", optionKeys, func(g field) {
				if v, ok := d.boolean(g.val, g.path); ok {
					c.privileged = &v
				}
			})
		case "pull":
			if v, ok := d.enum(f.val, f.path, "a pull policy", pullPolicies); ok {
				c.pull = &v
			}
		case "credentials":
			cr := &credentialSpec{}
			d.object(f.val, f.path, "credentials", credentialKeys, func(g field) {
				v, ok := d.str(g.val, g.path, "a value")
				if !ok {
					return
				}
				t := text{v: v, node: d.resolve(g.val), path: g.path}
				switch g.key {
				case "registry":
					if !isRegistryHost(v) && v != "docker.io" || strings.ContainsAny(v, "/ ") {
						d.add(ErrInvalid, t.node, g.path, "registry %q: expected a registry host such as registry.example.com or localhost:5000", v)
						return
					}
					cr.registry = t
				case "username":
					cr.username = t
				case "password":
					cr.password = t
				}
			})
			r := d.resolve(f.val)
			if r == nil || r.Kind != yaml.MappingNode {
				return
			}
			if cr.username.node == nil || cr.password.node == nil {
				d.add(ErrRequired, r, f.path, "credentials need a username and a password (write the password as ${{ secrets.NAME }})")
				return
			}
			if len(SecretRefs(cr.password.v)) == 0 && !strings.Contains(cr.password.v, "${{") {
				d.add(ErrInvalid, cr.password.node, cr.password.path, "a password written out would be stored with every run; set a project secret and write ${{ secrets.NAME }}")
				return
			}
			c.credentials = cr
		}
	})
}

// services decodes services: {NAME: {image, env, command, ports, healthcheck}}.
func (d *decoder) services(n *yaml.Node, p string) []serviceSpec {
	var out []serviceSpec
	for _, f := range d.fields(n, p, "a mapping of service names to services") {
		if d.abort {
			return nil
		}
		if !serviceNamePattern.MatchString(f.key) {
			d.add(ErrInvalid, f.keyNode, f.path, "service name %q: a service is reached by its name, which must be a host name: lower-case letters, digits and '-', not starting or ending with '-' (at most 63)", f.key)
			continue
		}
		s := serviceSpec{name: f.key, key: f.keyNode, path: f.path}
		d.object(f.val, f.path, "service "+f.key, serviceKeys, func(g field) {
			switch g.key {
			case "image":
				if t := d.image(g.val, g.path); t != nil {
					s.image = *t
				}
			case "env":
				s.env = d.env(g.val, g.path)
			case "command":
				s.commandSet = true
				s.command = d.command(g.val, g.path)
			case "ports":
				for i, item := range d.items(g.val, g.path, "a list of ports", true) {
					ip := indexPath(g.path, i)
					v, ok := d.str(item, ip, "a port such as 5432 or 8080/tcp")
					if !ok {
						continue
					}
					m := portPattern.FindStringSubmatch(v)
					if m == nil {
						d.add(ErrInvalid, item, ip, "port %q: expected a container port such as 5432 or 53/udp, or HOST:CONTAINER such as 15432:5432", v)
						continue
					}
					bad := ""
					for _, n := range m[1:3] {
						if k, _ := strconv.Atoi(n); n != "" && (k < 1 || k > 65535) {
							bad = n
						}
					}
					if bad != "" {
						d.add(ErrInvalid, item, ip, "port %s is not between 1 and 65535", bad)
						continue
					}
					s.ports = append(s.ports, text{v: v, node: d.resolve(item), path: ip})
				}
			case "healthcheck":
				s.healthcheck = d.healthcheck(g.val, g.path)
			}
		})
		if r := d.resolve(f.val); r != nil && r.Kind == yaml.MappingNode && s.image.node == nil && !d.abort {
			if !hasKey(r, "image") {
				d.add(ErrRequired, f.keyNode, f.path+".image", "service %q needs an image", f.key)
			}
			continue
		}
		if s.image.node != nil {
			out = append(out, s)
		}
	}
	return out
}

func hasKey(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return true
		}
	}
	return false
}

// command reads a command as a list of arguments, or as a string that runs with sh -c.
func (d *decoder) command(n *yaml.Node, p string) []text {
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	if r.Kind == yaml.ScalarNode {
		v, ok := d.str(n, p, "a command")
		if !ok {
			return nil
		}
		if strings.TrimSpace(v) == "" {
			d.add(ErrRequired, r, p, "command is empty")
			return nil
		}
		return []text{{v: "sh", node: r, path: p}, {v: "-c", node: r, path: p}, {v: v, node: r, path: p}}
	}
	var out []text
	for i, item := range d.items(n, p, "a command: a string or a list of arguments", false) {
		ip := indexPath(p, i)
		if v, ok := d.str(item, ip, "an argument"); ok {
			out = append(out, text{v: v, node: d.resolve(item), path: ip})
		}
	}
	if len(out) == 0 && r.Kind == yaml.SequenceNode {
		d.add(ErrRequired, r, p, "command is empty")
	}
	return out
}

func (d *decoder) healthcheck(n *yaml.Node, p string) *healthcheckSpec {
	h := &healthcheckSpec{}
	seen := false
	d.object(n, p, "healthcheck", healthcheckKeys, func(f field) {
		switch f.key {
		case "command":
			seen = true
			h.command = d.command(f.val, f.path)
		case "interval":
			if v, ok := d.duration(f.val, f.path, true); ok {
				h.interval = &v
			}
		case "timeout":
			if v, ok := d.duration(f.val, f.path, true); ok {
				h.timeout = &v
			}
		case "retries":
			if v, ok := d.integer(f.val, f.path, 1, 10000); ok {
				h.retries = &v
			}
		}
	})
	r := d.resolve(n)
	if r == nil || r.Kind != yaml.MappingNode {
		return nil
	}
	if !seen {
		d.add(ErrRequired, r, p+".command", "a healthcheck needs a command")
		return nil
	}
	if len(h.command) == 0 {
		return nil
	}
	return h
}

// buildContainer resolves a job's image, container: and services: for one instance.
func (d *decoder) buildContainer(job *Job, def, own settings, j *jobSpec, in []MatrixValue, env map[string]string) {
	img := def.image
	if own.imageSet {
		img = own.image
	}
	if img == nil {
		if def.imageSet && def.image == nil || own.imageSet {
			return // the image was not valid, and that was told
		}
		if own.container.set {
			d.add(ErrInvalid, own.container.node, own.container.path, "container: sets how the job's image runs, and job %q has no image", j.name)
		}
		d.buildServices(job, j, in, env)
		return
	}
	job.Image = d.substitute(*img, in, env)
	if strings.TrimSpace(job.Image) == "" && strings.Contains(img.v, "${{") {
		// A matrix or env value that leaves the image empty runs this instance without
		// a container, as GitHub runs a job whose container: is "": its services
		// published on the worker's loopback.
		job.Image = ""
		d.buildServices(job, j, in, env)
		return
	}
	if msg := CheckImageRef(job.Image); msg != "" && strings.Contains(img.v, "${{") {
		d.add(ErrInvalid, img.node, img.path, "image %q %s", job.Image, msg)
	}
	c := Container{}
	var cred *credentialSpec
	for _, l := range []containerSpec{def.container, own.container} {
		if l.user != nil {
			c.User = d.substitute(*l.user, in, env)
		}
		if l.privileged != nil {
			c.Privileged = *l.privileged
		}
		if l.pull != nil {
			c.Pull = *l.pull
		}
		if l.credentials != nil {
			cred = l.credentials
		}
	}
	if cred != nil {
		c.Credentials = &RegistryCredentials{
			Registry: cred.registry.v,
			Username: d.substituteRefs(cred.username, in, env, true, false),
			Password: d.substituteRefs(cred.password, in, env, true, false),
		}
		if c.Credentials.Registry == "" {
			c.Credentials.Registry = ImageRegistry(job.Image)
		}
	}
	if c != (Container{}) {
		job.Container = &c
	}
	d.buildServices(job, j, in, env)
	if c.Privileged && !contains(job.RunsOn, PrivilegedLabel) {
		job.RunsOn = append(job.RunsOn, PrivilegedLabel)
	}
}

// buildServices resolves a job's services: for one instance. The services of a job
// with an image are reached by their names, at their container ports; those of a job
// without one on the worker's loopback, each port published there (HOST:CONTAINER at
// HOST, a bare one at a free port). Either way the job needs a worker with a Docker
// Engine: the docker executor's label.
func (d *decoder) buildServices(job *Job, j *jobSpec, in []MatrixValue, env map[string]string) {
	for _, s := range j.services {
		svc := Service{Name: s.name, Image: d.substitute(s.image, in, env)}
		if msg := CheckImageRef(svc.Image); msg != "" && strings.Contains(s.image.v, "${{") {
			d.add(ErrInvalid, s.image.node, s.image.path, "image %q %s", svc.Image, msg)
		}
		for _, v := range s.env {
			if svc.Env == nil {
				svc.Env = map[string]string{}
			}
			svc.Env[v.name] = d.substituteRefs(v.value, in, env, true, false)
		}
		for _, a := range s.command {
			svc.Command = append(svc.Command, d.substitute(a, in, env))
		}
		for _, pt := range s.ports {
			p := pt.v
			if job.Image != "" {
				// The steps reach it by its name, at its own port.
				p = ContainerPort(p)
			}
			svc.Ports = append(svc.Ports, p)
		}
		if h := s.healthcheck; h != nil {
			hc := &Healthcheck{Interval: Duration(DefaultHealthInterval), Timeout: Duration(DefaultHealthTimeout), Retries: DefaultHealthRetries}
			for _, a := range h.command {
				hc.Command = append(hc.Command, d.substitute(a, in, env))
			}
			if h.interval != nil {
				hc.Interval = Duration(*h.interval)
			}
			if h.timeout != nil {
				hc.Timeout = Duration(*h.timeout)
			}
			if h.retries != nil {
				hc.Retries = *h.retries
			}
			svc.Healthcheck = hc
		}
		job.Services = append(job.Services, svc)
	}
	if (job.Image != "" || len(job.Services) > 0) && !contains(job.RunsOn, DockerLabel) {
		job.RunsOn = append(job.RunsOn, DockerLabel)
	}
}

// ContainerPort is the container's port of a service's port as written: CONTAINER of
// HOST:CONTAINER ("5432/tcp" of "15432:5432/tcp").
func ContainerPort(p string) string {
	if _, c, ok := strings.Cut(p, ":"); ok {
		return c
	}
	return p
}
