package agent

import (
	"maps"
	"slices"

	"github.com/gantry-ci/gantry/internal/logs"
)

// maskSecrets registers every secret value the coordinator gave the job with its
// recorder, before anything of the job runs: the secrets its env refers to and the run's
// secret env. The values live only in this attempt's memory and its steps' environments;
// the worker never logs them.
func maskSecrets(j claimedJob, rec *logs.Recorder) {
	for _, v := range j.Secrets {
		rec.MaskSecret(v)
	}
	for _, k := range j.SecretEnv {
		if v, ok := j.RunEnv[k]; ok {
			rec.MaskSecret(v)
		}
	}
}

// withholdSecretOutputs removes from outputs each one whose name or value holds what the
// job's log masks (a secret the job was given, in any form the log masks, or a value a
// step registered with ::add-mask::) and says so in the log, by name. A job's outputs go
// to the coordinator, which keeps them in clear, shows them to whoever may read the run
// and puts them into the jobs that need it, where no log masks them.
func withholdSecretOutputs(rec *logs.Recorder, outputs map[string]string) {
	for _, name := range slices.Sorted(maps.Keys(outputs)) {
		if rec.HoldsSecret(name) || rec.HoldsSecret(outputs[name]) {
			delete(outputs, name)
			// System masks the name should it be the secret.
			rec.System("output " + name + " withheld: it holds a secret value")
		}
	}
}
