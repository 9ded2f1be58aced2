package secret

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	kr, err := NewKeyring(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	sc := Scope{Project: "web", Name: "DEPLOY_KEY"}
	value := []byte("hunter2-very-secret")
	s, err := kr.Seal(value, sc)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(s.Ciphertext, value) || bytes.Contains(s.WrappedKey, value) {
		t.Fatal("ciphertext holds the value")
	}
	got, err := kr.Open(s, sc)
	if err != nil || string(got) != string(value) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	s2, _ := kr.Seal(value, sc)
	if bytes.Equal(s.Ciphertext, s2.Ciphertext) || bytes.Equal(s.WrappedKey, s2.WrappedKey) {
		t.Fatal("two seals of one value are equal: nonce or data key reused")
	}

	t.Run("tampered", func(t *testing.T) {
		for name, mut := range map[string]func(*Sealed){
			"ciphertext": func(s *Sealed) { s.Ciphertext[len(s.Ciphertext)-1] ^= 1 },
			"nonce":      func(s *Sealed) { s.Ciphertext[0] ^= 1 },
			"wrapped":    func(s *Sealed) { s.WrappedKey[20] ^= 1 },
			"short":      func(s *Sealed) { s.Ciphertext = s.Ciphertext[:5] },
			"key id":     func(s *Sealed) { s.KeyID = "0011223344556677" },
		} {
			c := Sealed{KeyID: s.KeyID, WrappedKey: bytes.Clone(s.WrappedKey), Ciphertext: bytes.Clone(s.Ciphertext)}
			mut(&c)
			if _, err := kr.Open(c, sc); !errors.Is(err, ErrDecrypt) {
				t.Errorf("%s: Open = %v, want ErrDecrypt", name, err)
			}
		}
	})
	t.Run("wrong scope", func(t *testing.T) {
		for _, other := range []Scope{
			{Project: "api", Name: "DEPLOY_KEY"},
			{Project: "web", Name: "OTHER"},
			{Project: "web", Environment: "production", Name: "DEPLOY_KEY"},
			{Project: "web", Name: "DEPLOY_KEY", Run: "r1"},
		} {
			if _, err := kr.Open(s, other); !errors.Is(err, ErrDecrypt) {
				t.Errorf("Open for %+v = %v, want ErrDecrypt", other, err)
			}
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		other, _ := NewKeyring(newKey(t))
		if _, err := other.Open(s, sc); !errors.Is(err, ErrDecrypt) {
			t.Errorf("Open with another keyring = %v, want ErrDecrypt", err)
		}
	})
}

func TestRotation(t *testing.T) {
	t.Parallel()
	oldKey, newK := newKey(t), newKey(t)
	before, _ := NewKeyring(oldKey)
	sc := Scope{Project: "web", Environment: "production", Name: "TOKEN"}
	s, err := before.Seal([]byte("value-1"), sc)
	if err != nil {
		t.Fatal(err)
	}
	// During a rotation the server holds both keys: old values open, new ones use the new.
	during, err := NewKeyring(newK, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := during.Open(s, sc); err != nil || string(got) != "value-1" {
		t.Fatalf("Open during rotation = %q, %v", got, err)
	}
	r, changed, err := during.Rewrap(s, sc)
	if err != nil || !changed || r.KeyID != KeyID(newK) || !bytes.Equal(r.Ciphertext, s.Ciphertext) {
		t.Fatalf("Rewrap = %+v, %v, %v", r, changed, err)
	}
	if _, again, _ := during.Rewrap(r, sc); again {
		t.Fatal("Rewrap of a value the primary key wraps changed it")
	}
	after, _ := NewKeyring(newK)
	if got, err := after.Open(r, sc); err != nil || string(got) != "value-1" {
		t.Fatalf("Open with only the new key = %q, %v", got, err)
	}
	if _, err := after.Open(s, sc); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("a value not rewrapped opened without its key: %v", err)
	}
}

func TestKeyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "secrets.key")
	k1, err := EnsureKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v", fi.Mode().Perm(), err)
	}
	k2, err := EnsureKeyFile(p)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second EnsureKeyFile gave another key: %v", err)
	}
	raw := filepath.Join(dir, "raw.key")
	if err := os.WriteFile(raw, k1, 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadKeyFile(raw); err != nil || !bytes.Equal(k, k1) {
		t.Fatalf("raw key file: %v", err)
	}
	if err := os.Chmod(raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(raw); err == nil {
		t.Fatal("a world-readable key file was accepted")
	}
	for _, bad := range []string{"", "short", base64.StdEncoding.EncodeToString(make([]byte, 16))} {
		if _, err := ParseKey([]byte(bad)); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	if k, err := ParseKey([]byte(base64.RawURLEncoding.EncodeToString(k1) + "\n")); err != nil || !bytes.Equal(k, k1) {
		t.Fatalf("ParseKey of unpadded URL base64: %v", err)
	}
}
