// Package forge speaks to code forges (GitHub, GitLab, Gitea/Forgejo, and a generic Gantry
// format): it verifies an incoming webhook, parses it into one Event, and reports a commit
// status back to the forge's REST API.
//
// It must not decide what runs: it knows nothing of projects, pipelines, `on:` filters or the
// store. Callers read the body (with their own size limit), verify, parse, and act.
package forge
