package pipeline

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestContainerPlan(t *testing.T) {
	t.Parallel()
	src := `
defaults:
  image: busybox:1.36
  container: { pull: never }
jobs:
  test:
    matrix: { go: ["1.25", "1.26"] }
    runs_on: [linux]
    image: "gantry-test/go:${{ matrix.go }}"
    container:
      user: "1000:1000"
      options: { privileged: true }
      credentials: { username: bot, password: "${{ secrets.REGISTRY_TOKEN }}" }
    services:
      db:
        image: registry.example.com:5000/team/db@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
        env: { PASSWORD: "${{ secrets.DB_PASSWORD }}", GO: "${{ matrix.go }}" }
        command: "httpd -f -p 8080"
        ports: [8080, "53/udp"]
        healthcheck: { command: [wget, -q, "http://localhost:8080"], interval: 2s, retries: 3 }
      cache: { image: "gantry-test/cache" }
    steps: [ { run: go version } ]
  plain:
    steps: [ { run: "true" } ]
`
	p, err := Compile([]byte(src), Options{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	j := p.Job("test (go=1.26)")
	if j == nil {
		t.Fatalf("no job test (go=1.26) in %v", p.Waves)
	}
	if j.Image != "gantry-test/go:1.26" || p.Job("test (go=1.25)").Image != "gantry-test/go:1.25" {
		t.Errorf("images = %q, %q; want the matrix value put in", j.Image, p.Job("test (go=1.25)").Image)
	}
	if !slices.Equal(j.RunsOn, []string{"linux", DockerLabel, PrivilegedLabel}) {
		t.Errorf("RunsOn = %v, want [linux docker docker-privileged]", j.RunsOn)
	}
	want := &Container{User: "1000:1000", Privileged: true, Pull: PullNever,
		Credentials: &RegistryCredentials{Registry: "docker.io", Username: "bot", Password: SecretRef("REGISTRY_TOKEN")}}
	if !reflect.DeepEqual(j.Container, want) {
		t.Errorf("Container = %+v, want %+v", j.Container, want)
	}
	if len(j.Services) != 2 || j.Services[0].Name != "db" || j.Services[1].Name != "cache" {
		t.Fatalf("Services = %+v, want db then cache", j.Services)
	}
	db := j.Services[0]
	wantDB := Service{
		Name:    "db",
		Image:   "registry.example.com:5000/team/db@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Env:     map[string]string{"PASSWORD": SecretRef("DB_PASSWORD"), "GO": "1.26"},
		Command: []string{"sh", "-c", "httpd -f -p 8080"},
		Ports:   []string{"8080", "53/udp"},
		Healthcheck: &Healthcheck{Command: []string{"wget", "-q", "http://localhost:8080"},
			Interval: Duration(2 * time.Second), Timeout: Duration(DefaultHealthTimeout), Retries: 3},
	}
	if !reflect.DeepEqual(db, wantDB) {
		t.Errorf("db = %+v\nwant %+v", db, wantDB)
	}
	if got := j.Secrets(); !slices.Equal(got, []string{"DB_PASSWORD", "REGISTRY_TOKEN"}) {
		t.Errorf("Secrets() = %v, want the service's and the registry's", got)
	}
	plain := p.Job("plain")
	if plain.Image != "busybox:1.36" || !reflect.DeepEqual(plain.Container, &Container{Pull: PullNever}) || !slices.Equal(plain.RunsOn, []string{DockerLabel}) {
		t.Errorf("plain: image %q, container %+v, runs_on %v; want the defaults", plain.Image, plain.Container, plain.RunsOn)
	}
}

// TestNoImageNoDocker: a job without an image is planned exactly as before.
func TestNoImageNoDocker(t *testing.T) {
	t.Parallel()
	p, err := Compile([]byte("jobs:\n  a: {runs_on: [linux], steps: [{run: x}]}"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := p.Jobs[0]
	if j.Image != "" || j.Container != nil || j.Services != nil || !slices.Equal(j.RunsOn, []string{"linux"}) {
		t.Errorf("job = %+v, want no container fields and runs_on [linux]", j)
	}
}

func TestContainerErrors(t *testing.T) {
	t.Parallel()
	job := func(body string) string { return "jobs:\n  a:\n" + body + "    steps: [{run: x}]\n" }
	tests := []struct {
		name      string
		src       string
		kind      ErrorKind
		path      string
		line, col int
		msg       string
	}{
		{"upper-case image", job("    image: Golang:1.26\n"), ErrInvalid, "jobs.a.image", 3, 12, "lower case"},
		{"image with a URL", job("    image: https://r.example.com/go\n"), ErrInvalid, "jobs.a.image", 3, 12, "without a scheme"},
		{"bad digest", job("    image: go@md5:abc\n"), ErrInvalid, "jobs.a.image", 3, 12, "sha256"},
		{"empty image", job("    image: \"\"\n"), ErrInvalid, "jobs.a.image", 3, 12, "is empty"},
		{"image not a string", job("    image: [go]\n"), ErrType, "jobs.a.image", 3, 12, "expected an image reference"},
		{"matrix makes a bad image", "jobs:\n  a:\n    matrix: {v: [\"A\"]}\n    image: \"go:${{ matrix.v }}x y\"\n    steps: [{run: x}]\n", ErrInvalid, "jobs.a.image", 4, 12, "white space"},
		{"matrix axis unknown in image", job("    image: \"go:${{ matrix.v }}\"\n"), ErrUnknownReference, "jobs.a.image", 3, 16, "no matrix"},
		{"secret in image", job("    image: \"go:${{ secrets.X }}\"\n"), ErrUnknownReference, "jobs.a.image", 3, 16, "may only stand in an env value"},
		{"unknown container key", job("    image: go\n    container: {usr: x}\n"), ErrUnknownKey, "jobs.a.container.usr", 4, 17, `did you mean "user"`},
		{"bad pull", job("    image: go\n    container: {pull: sometimes}\n"), ErrInvalid, "jobs.a.container.pull", 4, 23, "if-not-present"},
		{"privileged not a bool", job("    image: go\n    container: {options: {privileged: yes please}}\n"), ErrType, "jobs.a.container.options.privileged", 4, 39, "true or false"},
		{"unknown option", job("    image: go\n    container: {options: {cap_add: x}}\n"), ErrUnknownKey, "jobs.a.container.options.cap_add", 4, 27, "unknown key"},
		{"user with spaces", job("    image: go\n    container: {user: \"a b\"}\n"), ErrInvalid, "jobs.a.container.user", 4, 23, "without spaces"},
		{"password written out", job("    image: go\n    container: {credentials: {username: u, password: hunter2}}\n"), ErrInvalid, "jobs.a.container.credentials.password", 4, 54, "secrets.NAME"},
		{"credentials without password", job("    image: go\n    container: {credentials: {username: u}}\n"), ErrRequired, "jobs.a.container.credentials", 4, 30, "username and a password"},
		{"bad registry", job("    image: go\n    container: {credentials: {registry: \"a/b\", username: u, password: \"${{ secrets.P }}\"}}\n"), ErrInvalid, "jobs.a.container.credentials.registry", 4, 41, "registry host"},
		{"container without image", job("    container: {user: x}\n"), ErrInvalid, "jobs.a.container", 3, 16, "has no image"},
		{"service name not a host name", job("    image: go\n    services: {Db_1: {image: postgres}}\n"), ErrInvalid, "jobs.a.services.Db_1", 4, 16, "host name"},
		{"service name ends in a dash", job("    image: go\n    services: {db-: {image: postgres}}\n"), ErrInvalid, "jobs.a.services.db-", 4, 16, "host name"},
		{"service without image", job("    image: go\n    services: {db: {ports: [1]}}\n"), ErrRequired, "jobs.a.services.db.image", 4, 16, "needs an image"},
		{"unknown service key", job("    image: go\n    services: {db: {image: postgres, port: [1]}}\n"), ErrUnknownKey, "jobs.a.services.db.port", 4, 38, `did you mean "ports"`},
		{"bad service image", job("    image: go\n    services: {db: {image: \"Postgres\"}}\n"), ErrInvalid, "jobs.a.services.db.image", 4, 28, "lower case"},
		{"port out of range", job("    image: go\n    services: {db: {image: postgres, ports: [0]}}\n"), ErrInvalid, "jobs.a.services.db.ports[0]", 4, 46, "between 1 and 65535"},
		{"port not a port", job("    image: go\n    services: {db: {image: postgres, ports: [\"80/icmp\"]}}\n"), ErrInvalid, "jobs.a.services.db.ports[0]", 4, 46, "container port"},
		{"host port out of range", job("    services: {db: {image: postgres, ports: [\"70000:5432\"]}}\n"), ErrInvalid, "jobs.a.services.db.ports[0]", 3, 46, "port 70000 is not between 1 and 65535"},
		{"host IP in a port", job("    services: {db: {image: postgres, ports: [\"127.0.0.1:5432:5432\"]}}\n"), ErrInvalid, "jobs.a.services.db.ports[0]", 3, 46, "HOST:CONTAINER"},
		{"empty command", job("    image: go\n    services: {db: {image: postgres, command: []}}\n"), ErrRequired, "jobs.a.services.db.command", 4, 47, "command is empty"},
		{"healthcheck without command", job("    image: go\n    services: {db: {image: postgres, healthcheck: {retries: 3}}}\n"), ErrRequired, "jobs.a.services.db.healthcheck.command", 4, 51, "needs a command"},
		{"healthcheck interval without unit", job("    image: go\n    services: {db: {image: postgres, healthcheck: {command: x, interval: 5}}}\n"), ErrInvalid, "jobs.a.services.db.healthcheck.interval", 4, 74, "no unit"},
		{"healthcheck retries zero", job("    image: go\n    services: {db: {image: postgres, healthcheck: {command: x, retries: 0}}}\n"), ErrInvalid, "jobs.a.services.db.healthcheck.retries", 4, 73, "from 1 to 10000"},
		{"services in defaults", "defaults:\n  services: {db: {image: x}}\njobs:\n  a: {steps: [{run: x}]}\n", ErrUnknownKey, "defaults.services", 2, 3, "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := compileErrs(t, tt.src)
			for _, e := range errs {
				if e.Kind == tt.kind && e.Path == tt.path && e.Line == tt.line && e.Column == tt.col && strings.Contains(e.Message, tt.msg) {
					return
				}
			}
			t.Errorf("want %s at %s %d:%d containing %q; got:\n%v", tt.kind, tt.path, tt.line, tt.col, tt.msg, errs)
		})
	}
}

func TestCheckImageRef(t *testing.T) {
	t.Parallel()
	good := []string{
		"busybox", "golang:1.26", "gantry-test/go:1.26", "library/ubuntu:24.04", "a__b/c.d-e:x_y.z",
		"registry.example.com/team/go:1.26", "localhost:5000/x", "localhost/x:1", "r.io:443/a/b/c",
		"go@sha256:" + strings.Repeat("a", 64), "go:1@sha256:" + strings.Repeat("0", 64),
	}
	for _, ref := range good {
		if msg := CheckImageRef(ref); msg != "" {
			t.Errorf("CheckImageRef(%q) = %q, want valid", ref, msg)
		}
	}
	bad := []string{"", "Go", "go:", ":1", "go::1", "-go", "go-", "a//b", "go@sha256:abc", "go:" + strings.Repeat("x", 129),
		"x y", "gantry-Test/go", "registry.example.com:port/x", "/go", "go/", "a@b"}
	for _, ref := range bad {
		if msg := CheckImageRef(ref); msg == "" {
			t.Errorf("CheckImageRef(%q) = valid, want an error", ref)
		}
	}
}

func TestImageRegistry(t *testing.T) {
	t.Parallel()
	for ref, want := range map[string]string{
		"golang:1.26": "docker.io", "team/go": "docker.io", "registry.example.com/team/go": "registry.example.com",
		"localhost:5000/x": "localhost:5000", "localhost/x": "localhost",
	} {
		if got := ImageRegistry(ref); got != want {
			t.Errorf("ImageRegistry(%q) = %q, want %q", ref, got, want)
		}
	}
}

// A matrix value that leaves the image empty runs that instance without a container, as
// GitHub runs a job whose container: is "".
func TestMatrixEmptyImage(t *testing.T) {
	t.Parallel()
	p, err := Compile([]byte("jobs:\n  a:\n    matrix: {img: [\"alpine:3\", \"\"]}\n    image: \"${{ matrix.img }}\"\n    steps: [{run: x}]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	with, without := p.Job("a (img=alpine:3)"), p.Job("a (img=)")
	if with == nil || without == nil {
		t.Fatalf("jobs: %v", p.Waves)
	}
	if with.Image != "alpine:3" || without.Image != "" || slices.Contains(without.RunsOn, DockerLabel) || !slices.Contains(with.RunsOn, DockerLabel) {
		t.Errorf("images %q, %q; runs_on %v, %v: want the empty one on the host", with.Image, without.Image, with.RunsOn, without.RunsOn)
	}
	// With services, the instance on the host has them published on the worker's
	// loopback (HOST:CONTAINER kept), the one in a container reaches them by name (the
	// container's port alone); both need the docker executor's worker.
	p, err = Compile([]byte("jobs:\n  a:\n    matrix: {img: [\"alpine:3\", \"\"]}\n    image: \"${{ matrix.img }}\"\n"+
		"    services: {db: {image: postgres, ports: [\"15432:5432\", 6379]}}\n    steps: [{run: x}]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	with, without = p.Job("a (img=alpine:3)"), p.Job("a (img=)")
	if without.Image != "" || len(without.Services) != 1 || !slices.Equal(without.Services[0].Ports, []string{"15432:5432", "6379"}) ||
		!slices.Contains(without.RunsOn, DockerLabel) {
		t.Errorf("the instance without an image: %+v, want its services with their ports as written and the docker label", without)
	}
	if len(with.Services) != 1 || !slices.Equal(with.Services[0].Ports, []string{"5432", "6379"}) {
		t.Errorf("the instance with an image: services %+v, want the container ports alone", with.Services)
	}
}

// TestHostServicesPlan: a job without an image may have services, started on the
// worker's Docker Engine: it asks for the docker executor's label, and keeps each port as
// written, HOST:CONTAINER or a bare container port.
func TestHostServicesPlan(t *testing.T) {
	t.Parallel()
	p, err := Compile([]byte(`jobs:
  a:
    runs_on: [linux]
    services:
      db:
        image: postgres:17
        env: {POSTGRES_PASSWORD: "${{ secrets.DB }}"}
        ports: ["5432:5432", 8080, "9000:9000/udp"]
        healthcheck: {command: pg_isready}
    steps: [{run: x}]
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := p.Job("a")
	if j.Image != "" || j.Container != nil || !slices.Equal(j.RunsOn, []string{"linux", DockerLabel}) {
		t.Errorf("job = %+v, want no image and runs_on [linux docker]", j)
	}
	if len(j.Services) != 1 || !slices.Equal(j.Services[0].Ports, []string{"5432:5432", "8080", "9000:9000/udp"}) ||
		j.Services[0].Env["POSTGRES_PASSWORD"] != SecretRef("DB") || j.Services[0].Healthcheck == nil {
		t.Errorf("services = %+v", j.Services)
	}
}
