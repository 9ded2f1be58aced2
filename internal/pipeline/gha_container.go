package pipeline

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A workflow job's container:, services: and actions/cache steps, in Gantry's image:,
// container:, services: and cache:.

// container translates container: IMAGE or container: {image, credentials, env, options}.
func (t *ghaTranslator) container(j *ghaJob, f field) {
	d := t.d
	r := d.resolve(f.val)
	if r == nil {
		return
	}
	if r.Kind == yaml.ScalarNode {
		if v, ok := d.str(r, f.path, "an image or a mapping"); ok {
			put(j.out, "image", f.keyNode, gStr(t.text(v, r, f.path, j, nil, ghaPlanTime), r))
			t.rename(j.path+".image", f.path)
			j.image = true
		}
		return
	}
	c := gMap(r)
	d.object(f.val, f.path, "container", []string{"image", "credentials", "env", "ports", "volumes", "options"}, func(g field) {
		switch g.key {
		case "image":
			if v, ok := d.str(g.val, g.path, "an image"); ok {
				put(j.out, "image", g.keyNode, gStr(t.text(v, d.resolve(g.val), g.path, j, nil, ghaPlanTime), d.resolve(g.val)))
				t.rename(j.path+".image", g.path)
				j.image = true
			}
		case "credentials":
			cred := gMap(d.resolve(g.val))
			d.object(g.val, g.path, "credentials", []string{"username", "password"}, func(h field) {
				if v, ok := d.str(h.val, h.path, "a "+h.key); ok {
					put(cred, h.key, h.keyNode, gStr(t.text(v, d.resolve(h.val), h.path, j, nil, ghaEnvValue), d.resolve(h.val)))
				}
			})
			put(c, "credentials", g.keyNode, cred)
			t.rename(j.path+".container.credentials", g.path)
		case "env":
			// The container's env is what the job's steps see: the job's env.
			if n := t.envMap(g.val, g.path, j, nil); n != nil {
				env := mappingValue(j.out, "env")
				if env == nil {
					env = gMap(n)
					put(j.out, "env", g.keyNode, env)
				}
				for i := 0; i+1 < len(n.Content); i += 2 {
					env.Content = append(env.Content, n.Content[i], n.Content[i+1])
					j.env = append(j.env, n.Content[i].Value)
				}
			}
		case "ports":
			// Published ports of the job's own container serve nothing a step needs.
		case "volumes":
			d.add(ErrInvalid, g.keyNode, g.path, "volumes are not supported: a Gantry job keeps what it needs in its workspace, caches and artifacts")
		case "options":
			t.containerOptions(c, g)
		}
	})
	if !j.image && !d.abort {
		d.add(ErrRequired, r, f.path+".image", "container needs an image")
	}
	if len(c.Content) > 0 {
		put(j.out, "container", f.keyNode, c)
		t.rename(j.path+".container", f.path)
	}
}

// containerOptions reads the docker flags of container.options that Gantry has settings
// for: --privileged and --user.
func (t *ghaTranslator) containerOptions(c *yaml.Node, g field) {
	d := t.d
	v, ok := d.str(g.val, g.path, "docker options")
	if !ok {
		return
	}
	at := d.resolve(g.val)
	args, err := splitWords(v)
	if err != "" {
		d.add(ErrInvalid, at, g.path, "options: %s", err)
		return
	}
	for i := 0; i < len(args); i++ {
		flag, val, hasVal := strings.Cut(args[i], "=")
		switch flag {
		case "--privileged":
			opts := gMap(at)
			put(opts, "privileged", at, gBool(true, at))
			put(c, "options", g.keyNode, opts)
		case "--user", "-u":
			if !hasVal {
				if i+1 >= len(args) {
					d.add(ErrInvalid, at, g.path, "options: %s needs a value", flag)
					return
				}
				i++
				val = args[i]
			}
			put(c, "user", g.keyNode, gStr(val, at))
		default:
			d.add(ErrInvalid, at, g.path, "container option %s is not supported; Gantry reads --privileged and --user", flag)
			return
		}
	}
}

// services translates services: {NAME: {image, env, ports, options}}. Gantry starts them
// beside the job's container, reached by their names, or, for a job on the runner
// itself, with their ports published on the worker's loopback, as GitHub does.
func (t *ghaTranslator) services(j *ghaJob, f field) {
	d := t.d
	out := gMap(d.resolve(f.val))
	for _, s := range d.fields(f.val, f.path, "a mapping of service names to services") {
		svc := gMap(d.resolve(s.val))
		d.object(s.val, s.path, "service "+s.key, []string{"image", "env", "ports", "options", "credentials", "volumes"}, func(g field) {
			switch g.key {
			case "image":
				if v, ok := d.str(g.val, g.path, "an image"); ok {
					put(svc, "image", g.keyNode, gStr(t.text(v, d.resolve(g.val), g.path, j, nil, ghaPlanTime), d.resolve(g.val)))
				}
			case "env":
				if n := t.envMap(g.val, g.path, j, nil); n != nil {
					put(svc, "env", g.keyNode, n)
				}
			case "ports":
				ports := gSeq(d.resolve(g.val))
				for i, item := range d.items(g.val, g.path, "a list of ports", true) {
					ip := indexPath(g.path, i)
					v, ok := d.str(item, ip, "a port")
					if !ok {
						continue
					}
					v, msg := ghaServicePort(strings.TrimSpace(v), j.image)
					if msg != "" {
						d.add(ErrInvalid, d.resolve(item), ip, "port %s", msg)
						continue
					}
					ports.Content = append(ports.Content, gStr(v, d.resolve(item)))
				}
				put(svc, "ports", g.keyNode, ports)
			case "options":
				t.serviceOptions(svc, g)
			case "credentials", "volumes":
				d.add(ErrInvalid, g.keyNode, g.path, "a service's %s is not supported", g.key)
			}
		})
		out.Content = append(out.Content, s.keyNode, svc)
	}
	put(j.out, "services", f.keyNode, out)
}

// serviceOptions reads docker's --health-* flags into a healthcheck.
func (t *ghaTranslator) serviceOptions(svc *yaml.Node, g field) {
	d := t.d
	v, ok := d.str(g.val, g.path, "docker options")
	if !ok {
		return
	}
	at := d.resolve(g.val)
	args, err := splitWords(v)
	if err != "" {
		d.add(ErrInvalid, at, g.path, "options: %s", err)
		return
	}
	hc := gMap(at)
	keys := map[string]string{"--health-cmd": "command", "--health-interval": "interval", "--health-timeout": "timeout", "--health-retries": "retries"}
	for i := 0; i < len(args); i++ {
		flag, val, hasVal := strings.Cut(args[i], "=")
		key, known := keys[flag]
		if !known {
			d.add(ErrInvalid, at, g.path, "service option %s is not supported; Gantry reads --health-cmd, --health-interval, --health-timeout and --health-retries", flag)
			return
		}
		if !hasVal {
			if i+1 >= len(args) {
				d.add(ErrInvalid, at, g.path, "options: %s needs a value", flag)
				return
			}
			i++
			val = args[i]
		}
		if key == "retries" {
			put(hc, key, at, gNode(yaml.ScalarNode, "!!int", val, at))
			continue
		}
		put(hc, key, at, gStr(val, at))
	}
	if len(hc.Content) > 0 {
		put(svc, "healthcheck", g.keyNode, hc)
	}
}

// splitWords splits docker options as a shell would: on spaces, with single and double
// quotes.
func splitWords(s string) ([]string, string) {
	var out []string
	var b strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Sprintf("a %c quote is not closed", quote)
	}
	if in {
		out = append(out, b.String())
	}
	return out, ""
}

// cache turns an actions/cache step into an entry of the job's cache:. Gantry restores
// every cache before the first step and saves it after the last, where GitHub restores at
// the step and saves at the end of the job.
func (t *ghaTranslator) cache(j *ghaJob, st *ghaStep, u field, args map[string]field) {
	d := t.d
	t.unsupportedInputs("actions/cache", args, []string{"path", "key", "restore-keys"},
		[]string{"enableCrossOsArchive", "upload-chunk-size", "save-always"})
	c := gMap(u.val)
	lines := func(f field) (*yaml.Node, bool) {
		v, at, ok := t.actionInput(j, st, f, ghaCacheKey)
		if !ok {
			return nil, false
		}
		seq := gSeq(at)
		for _, line := range strings.Split(v, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				seq.Content = append(seq.Content, gStr(line, at))
			}
		}
		return seq, true
	}
	f, ok := args["key"]
	if !ok {
		d.add(ErrRequired, u.val, u.path, "actions/cache needs a key")
		return
	}
	if v, at, ok := t.actionInput(j, st, f, ghaCacheKey); ok {
		put(c, "key", f.keyNode, gStr(v, at))
	}
	if f, ok := args["restore-keys"]; ok {
		if seq, ok := lines(f); ok {
			put(c, "restore_keys", f.keyNode, seq)
			t.rename(fmt.Sprintf("%s.cache[%d].restore_keys", j.path, len(j.caches)), f.path)
		}
	}
	f, ok = args["path"]
	if !ok {
		d.add(ErrRequired, u.val, u.path, "actions/cache needs a path")
		return
	}
	if seq, ok := lines(f); ok {
		put(c, "paths", f.keyNode, seq)
		t.rename(fmt.Sprintf("%s.cache[%d].paths", j.path, len(j.caches)), f.path)
	}
	t.rename(fmt.Sprintf("%s.cache[%d]", j.path, len(j.caches)), u.path)
	j.caches = append(j.caches, c)
}

// ghaServicePort translates a service's port as docker run -p takes it,
// [[IP:]HOST:]CONTAINER[/PROTO], into Gantry's [HOST:]CONTAINER[/PROTO] (for a job in
// a container, the plan keeps CONTAINER alone: its steps reach the service by name). For
// a job on the runner an IP other than the loopback or every address is refused: Gantry
// publishes on 127.0.0.1 alone.
func ghaServicePort(v string, inContainer bool) (string, string) {
	parts := strings.Split(v, ":")
	if len(parts) > 3 {
		return "", fmt.Sprintf("%q: expected [HOST:]CONTAINER[/PROTOCOL]", v)
	}
	if len(parts) == 3 {
		switch parts[0] {
		case "", "127.0.0.1", "0.0.0.0", "localhost":
		default:
			if inContainer {
				break
			}
			return "", fmt.Sprintf("%q: Gantry publishes services' ports on the worker's 127.0.0.1 only, not on %s", v, parts[0])
		}
		parts = parts[1:]
	}
	c := parts[len(parts)-1]
	if !portPattern.MatchString(c) || strings.Contains(c, ":") {
		return "", fmt.Sprintf("%q: expected a port number such as 5432 or 53/udp (ranges are not supported)", v)
	}
	if len(parts) == 1 || parts[0] == "" {
		return c, ""
	}
	if !portPattern.MatchString(parts[0]) || strings.Contains(parts[0], "/") {
		return "", fmt.Sprintf("%q: host port %q: expected a port number (ranges are not supported)", v, parts[0])
	}
	return parts[0] + ":" + c, ""
}
