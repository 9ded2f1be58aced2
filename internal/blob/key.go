package blob

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KeySize is the length of a key made by LoadOrCreateKey.
const KeySize = 32

// LoadOrCreateKey reads a KeySize-byte key from path, or creates one (mode 0600) when the
// file is missing, so that signed URLs survive restarts. Two processes creating it at once
// end up with the same key.
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	// Write a temp file and link it into place: a crash never leaves a short key behind, and
	// the link fails rather than replace a key another process just made.
	f, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(key)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	if err := os.Link(tmp, path); errors.Is(err, fs.ErrExist) {
		return readKey(path)
	} else if err != nil {
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	return key, nil
}

func readKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("read signing key %s: it has %d bytes, want %d", path, len(key), KeySize)
	}
	return key, nil
}
