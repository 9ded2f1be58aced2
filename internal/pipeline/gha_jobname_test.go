package pipeline

import (
	"strings"
	"testing"
)

// A job's name: with operators is evaluated for each instance of its matrix, as GitHub
// names them; reading anything but matrix there is an error at the name.
func TestWorkflowJobNameExpressions(t *testing.T) {
	wf := `on: push
jobs:
  build:
    name: ${{ matrix.name || matrix.os }} (${{ matrix.tls == 'on' && 'TLS' || 'plain' }})
    runs-on: ubuntu-latest
    strategy:
      matrix:
        os: [linux, bsd]
        tls: ['on', 'off']
        include:
          - {os: linux, tls: 'on', name: fast}
    steps: [{run: make}]
`
	p, err := Compile([]byte(wf), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range p.Jobs {
		names = append(names, j.DisplayName)
	}
	want := "fast (TLS),linux (plain),bsd (TLS),bsd (plain)"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("names %s, want %s", got, want)
	}
	bad := strings.Replace(wf, "matrix.name || matrix.os", "github.ref || matrix.os", 1)
	if _, err := Compile([]byte(bad), Options{}); err == nil || !strings.Contains(err.Error(), "may read matrix and literals only, not github") {
		t.Errorf("a name reading github.ref: %v", err)
	}
}
