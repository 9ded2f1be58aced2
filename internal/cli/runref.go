package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// runRefHelp says what a command taking RUN accepts.
const runRefHelp = "RUN is a run's id, a unique start of it (the short id the dashboard and gantry runs\n" +
	"show), or PROJECT#NUMBER, the run's number in its project (web#42).\n\n"

// minRunPrefix is the shortest start of a run id taken for the run: shorter ones name
// too many runs to be of use.
const minRunPrefix = 4

// parseRunRef checks the form of a RUN argument: a UUID, PROJECT#NUMBER, or the start of
// a run id in hex (dashes allowed where a UUID has them). It returns the project and
// number of PROJECT#NUMBER, else the id or prefix in lower case.
func parseRunRef(arg string) (project string, number int, idOrPrefix string, err error) {
	if p, n, ok := strings.Cut(arg, "#"); ok {
		num, perr := strconv.Atoi(n)
		if p == "" || perr != nil || num < 1 {
			return "", 0, "", usagef("run %q: want PROJECT#NUMBER, as in web#42", arg)
		}
		return p, num, "", nil
	}
	if id, err := uuid.Parse(arg); err == nil {
		return "", 0, id.String(), nil
	}
	hex := strings.ReplaceAll(strings.ToLower(arg), "-", "")
	if len(hex) < minRunPrefix || len(hex) >= 32 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", 0, "", usagef("run %q is not a run id, the start of one (%d hex digits or more), or PROJECT#NUMBER (web#42)", arg, minRunPrefix)
	}
	return "", 0, strings.ToLower(arg), nil
}

// resolveRun returns the id of the run arg names (see parseRunRef), asking the server for
// a number or a prefix. A prefix that starts no run id, or more than one, is an error.
func resolveRun(ctx context.Context, c *apiClient, arg string) (string, error) {
	project, number, id, err := parseRunRef(arg)
	if err != nil {
		return "", err
	}
	if project != "" {
		var run runDetails
		if err := c.getJSON(ctx, "/api/v1/projects/"+url.PathEscape(project)+"/runs/"+strconv.Itoa(number), &run); err != nil {
			return "", fmt.Errorf("get run %s: %w", arg, err)
		}
		return run.ID, nil
	}
	if len(strings.ReplaceAll(id, "-", "")) == 32 {
		return id, nil
	}
	// Ids sort as their text does: the runs that start with the prefix are the newest
	// ones before the prefix followed by f's. Two of them tell unique from ambiguous.
	hex := strings.ReplaceAll(id, "-", "")
	upper, err := uuid.Parse(hex + strings.Repeat("f", 32-len(hex)))
	if err != nil {
		return "", usagef("run %q is not the start of a run id", arg)
	}
	var page struct {
		Runs []runDetails `json:"runs"`
	}
	if err := c.getJSON(ctx, "/api/v1/runs?limit=2&cursor="+upper.String(), &page); err != nil {
		return "", fmt.Errorf("find the run that starts with %s: %w", arg, err)
	}
	var found []runDetails
	for _, r := range page.Runs {
		if strings.HasPrefix(strings.ReplaceAll(r.ID, "-", ""), hex) {
			found = append(found, r)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no run's id starts with %s", arg)
	case 1:
		return found[0].ID, nil
	}
	return "", usagef("more than one run's id starts with %s (%s, %s, ...): give more of it, or PROJECT#NUMBER",
		arg, runLabel(found[0]), runLabel(found[1]))
}

// runLabel names a run as users do: PROJECT#NUMBER, or its id from a server that does
// not number runs.
func runLabel(r runDetails) string {
	if r.Number > 0 && r.Project != "" {
		return r.Project + "#" + strconv.Itoa(r.Number)
	}
	return r.ID
}
