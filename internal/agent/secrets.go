package agent

import "github.com/gantry-ci/gantry/internal/logs"

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
