package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// projectCheck is what gantry validate and gantry plan need to check definitions
// against a project on a coordinator: --project and where the coordinator is. Without
// --project they stay offline.
type projectCheck struct {
	Project string
	client  clientConfig
}

// projectCheckFlags adds --project, --server, --token, --token-file and --config (not
// --json: the command has its own output flags).
func (a *app) projectCheckFlags(cmd *cobra.Command, c *projectCheck) {
	c.client.lookupEnv = a.lookupEnv
	f := cmd.Flags()
	f.StringVar(&c.Project, "project", "", "also check against this project on the coordinator: name each environment a job names that the project does not define")
	f.StringVar(&c.client.Server, "server", "", "with --project: coordinator URL (default "+defaultServer+", or server: in the config file)")
	f.StringVar(&c.client.Token, "token", "", "with --project: API token (a read token of the project)")
	f.StringVar(&c.client.TokenFile, "token-file", "", "with --project: read the API token from this file (its first line)")
	f.StringVar(&c.client.Config, "config", "", "with --project: client config file with server: and token:")
}

// environmentWarnings returns, for each plan (nil for an invalid one), what store.NoRules
// says of each environment its jobs name that c.Project does not define, one line per
// job; nil without --project. A project the coordinator does not know defines none.
func (a *app) environmentWarnings(ctx context.Context, c projectCheck, plans []*pipeline.Plan) ([][]string, error) {
	if c.Project == "" {
		return nil, nil
	}
	api, err := c.client.client()
	if err != nil {
		return nil, err
	}
	var list struct {
		Environments []struct {
			Name string `json:"name"`
		} `json:"environments"`
	}
	defined := map[string]*store.Environment{}
	err = api.getJSON(ctx, "/api/v1/projects/"+url.PathEscape(c.Project)+"/environments", &list)
	var se *serverError
	switch {
	case errors.As(err, &se) && se.Status == http.StatusNotFound:
		// No such project (or none this token may see): nothing is defined.
	case err != nil:
		return nil, fmt.Errorf("read the environments of project %s: %w", c.Project, err)
	}
	for _, e := range list.Environments {
		defined[e.Name] = &store.Environment{Name: e.Name}
	}
	out := make([][]string, len(plans))
	for i, p := range plans {
		if p == nil {
			continue
		}
		for _, j := range p.Jobs {
			if j.Environment == nil {
				continue
			}
			if msg := store.NoRules(c.Project, j.Environment.Name, defined[j.Environment.Name]); msg != "" {
				out[i] = append(out[i], fmt.Sprintf("job %s: %s", j.Key, msg))
			}
		}
	}
	return out, nil
}
