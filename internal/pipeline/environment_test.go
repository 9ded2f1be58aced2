package pipeline

import (
	"errors"
	"strings"
	"testing"
)

func TestEnvironmentPlanned(t *testing.T) {
	t.Parallel()
	src := `
jobs:
  build: {steps: [{run: make}]}
  deploy:
    needs: [build]
    environment: production
    steps: [{run: ./deploy}]
  preview:
    matrix: {target: [staging, qa]}
    environment: {name: "${{ matrix.target }}", url: "https://${{ matrix.target }}.example.com"}
    steps: [{run: ./deploy}]
`
	p, err := Compile([]byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Job("build").Environment; got != nil {
		t.Errorf("build: environment %+v, want none", got)
	}
	if got := p.Job("deploy").Environment; got == nil || *got != (Environment{Name: "production"}) {
		t.Errorf("deploy: environment %+v, want production", got)
	}
	if got := p.Job("preview (target=qa)").Environment; got == nil || *got != (Environment{Name: "qa", URL: "https://qa.example.com"}) {
		t.Errorf("preview qa: environment %+v", got)
	}
}

func TestEnvironmentErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		src       string
		kind      ErrorKind
		path      string
		line, col int
		contains  string
	}{
		{"unknown key suggests", "jobs:\n  a:\n    environment: {nmae: prod}\n    steps: [{run: x}]", ErrUnknownKey, "jobs.a.environment.nmae", 3, 19, `did you mean "name"`},
		{"misspelt job key suggests", "jobs:\n  a:\n    enviroment: prod\n    steps: [{run: x}]", ErrUnknownKey, "jobs.a.enviroment", 3, 5, `did you mean "environment"`},
		{"mapping without name", "jobs:\n  a:\n    environment: {url: \"https://x\"}\n    steps: [{run: x}]", ErrRequired, "jobs.a.environment.name", 3, 18, "environment needs a name"},
		{"bad name", "jobs:\n  a:\n    environment: \"prod env\"\n    steps: [{run: x}]", ErrInvalid, "jobs.a.environment", 3, 18, `environment name "prod env"`},
		{"bad url", "jobs:\n  a:\n    environment: {name: prod, url: \"ftp://x\"}\n    steps: [{run: x}]", ErrInvalid, "jobs.a.environment.url", 3, 36, "absolute http or https URL"},
		{"list", "jobs:\n  a:\n    environment: [prod]\n    steps: [{run: x}]", ErrType, "jobs.a.environment", 3, 18, "environment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := compileErrs(t, tt.src)
			for _, e := range errs {
				if e.Path == tt.path {
					if !errors.Is(e, tt.kind) || e.Line != tt.line || e.Column != tt.col || !strings.Contains(e.Error(), tt.contains) {
						t.Errorf("error %v (kind %v, %d:%d); want kind %v at %d:%d containing %q", e, e.Kind, e.Line, e.Column, tt.kind, tt.line, tt.col, tt.contains)
					}
					return
				}
			}
			t.Errorf("no error at %s in %v", tt.path, errs)
		})
	}
}
