package cli

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// clientFile is the client config file: where the coordinator is and how to sign in, so
// that neither has to be repeated on every command.
//
//	server: https://ci.example.com
//	token: gtk_...
type clientFile struct {
	Server string `yaml:"server"`
	Token  string `yaml:"token"`
}

// clientFilePath is the config file to read: the one named (by --config or
// GANTRY_CONFIG), else $XDG_CONFIG_HOME/gantry/config.yaml, else
// ~/.config/gantry/config.yaml. explicit says it was named, so that a missing file is a
// mistake rather than the common case of having none.
func clientFilePath(named string, lookupEnv func(string) (string, bool)) (path string, explicit bool) {
	if named != "" {
		return named, true
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if dir, ok := lookupEnv("XDG_CONFIG_HOME"); ok && filepath.IsAbs(dir) {
		return filepath.Join(dir, "gantry", "config.yaml"), false
	}
	if home, ok := lookupEnv("HOME"); ok && home != "" {
		return filepath.Join(home, ".config", "gantry", "config.yaml"), false
	}
	return "", false
}

// loadClientFile reads the client config file; a default one that does not exist is
// empty. Unknown keys are errors, so that a misspelt `sever:` does not silently send
// commands to the default server.
func loadClientFile(named string, lookupEnv func(string) (string, bool)) (clientFile, error) {
	var cf clientFile
	path, explicit := clientFilePath(named, lookupEnv)
	if path == "" {
		return cf, nil
	}
	data, err := readFile(path, 1<<20)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return cf, nil
		}
		return cf, usagef("read config file %s: %v", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil && !errors.Is(err, io.EOF) {
		return cf, usagef("config file %s: %v", path, err)
	}
	return cf, nil
}

// configHelp is the part of a client command's help that says where its server comes from.
const configHelp = "The coordinator is --server (or GANTRY_SERVER), else server: in the config file\n" +
	"(--config, GANTRY_CONFIG, or $XDG_CONFIG_HOME/gantry/config.yaml), else\n" +
	defaultServer + "; the token likewise (--token, GANTRY_TOKEN, token:)."
