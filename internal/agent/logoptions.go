package agent

import (
	"slices"
	"strings"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// recorderOptions are the options of a job attempt's log recorder: debug mode, which
// shows the ::debug:: messages of its steps, when the job asks for it as GitHub's are
// asked (docs/logs.md).
func recorderOptions(j claimedJob) logs.RecorderOptions {
	return logs.RecorderOptions{Debug: stepDebug(j)}
}

// stepDebug reports whether ACTIONS_STEP_DEBUG is true for the job: in the run's env
// (gantry submit --env), the job's, or a secret of that name, as on GitHub, where it is
// a secret or a variable.
func stepDebug(j claimedJob) bool {
	const name = "ACTIONS_STEP_DEBUG"
	v, ok := j.RunEnv[name]
	if !ok && j.Spec != nil {
		if v, ok = j.Spec.Env[name]; ok {
			v = pipeline.ExpandSecrets(v, j.Secrets)
		}
	}
	if !ok {
		v = j.Secrets[name]
	}
	v = strings.TrimSpace(v)
	return strings.EqualFold(v, "true") || v == "1"
}

// featureLogCommands is the coordinator's feature (api: the register answer's features)
// of log lines with group, level and annotation, which a coordinator without it refuses
// as unknown fields.
const featureLogCommands = "logs.commands"

// plainLines is lines as a coordinator without featureLogCommands takes them: a fold's
// title as "▸ TITLE", its end as an empty line (seqs stay dense), a message after its
// level, as gantry logs prints them. It returns lines itself when none needs rewriting,
// else a copy: the shipper may send lines again.
func plainLines(lines []logs.Line) []logs.Line {
	i := slices.IndexFunc(lines, func(l logs.Line) bool { return l.Group != "" || l.Level != "" || l.Annotation != nil })
	if i < 0 {
		return lines
	}
	out := slices.Clone(lines)
	for k := i; k < len(out); k++ {
		l := &out[k]
		switch {
		case l.Group == logs.GroupStart:
			l.Text = "▸ " + l.Text
		case l.Group == logs.GroupEnd:
			l.Text = ""
		case l.Level != "":
			l.Text = l.Level + ": " + l.Text
		}
		l.Group, l.Level, l.Annotation = "", "", nil
	}
	return out
}
