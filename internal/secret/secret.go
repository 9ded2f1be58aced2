package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the size of a key-encryption key and of a data key: AES-256.
const KeySize = 32

// EnvKey is the environment variable that may hold the key-encryption key (base64).
const EnvKey = "GANTRY_SECRETS_KEY"

// ErrDecrypt means a sealed value could not be opened: it was changed, it belongs to
// another (project, environment, name), or its key is not in the keyring.
var ErrDecrypt = errors.New("secret: cannot decrypt")

// ErrNoKey means no key-encryption key was configured.
var ErrNoKey = errors.New("secret: no key-encryption key configured")

// Sealed is an encrypted value as it is stored: which key-encryption key wrapped its data
// key, the wrapped data key, and the value encrypted under the data key. Each byte slice
// begins with its own random 12-byte nonce.
type Sealed struct {
	KeyID      string
	WrappedKey []byte
	Ciphertext []byte
}

// Scope names what a value belongs to. It is the GCM additional data of both the data
// key and the value, so a stored row moved to another name, environment or project no
// longer opens.
type Scope struct {
	Project     string
	Environment string
	Name        string
	// Run, when set, scopes a run's own secret env value to that run.
	Run string
}

func (s Scope) ad(purpose string) []byte {
	// NUL cannot occur in any of the parts (names are validated), so the encoding is
	// unambiguous.
	return []byte("gantry-secret-v1\x00" + purpose + "\x00" + s.Project + "\x00" + s.Environment + "\x00" + s.Name + "\x00" + s.Run)
}

type kek struct {
	id   string
	aead cipher.AEAD
}

// Keyring holds the key-encryption key new values are sealed with and, during a
// rotation, the older keys values may still be sealed with.
type Keyring struct {
	primary *kek
	byID    map[string]*kek
}

// KeyID is a key's public name: the first 8 bytes of SHA-256 over a label and the key,
// in hex. It tells which key wrapped a data key without revealing anything of the key.
func KeyID(key []byte) string {
	h := sha256.Sum256(append([]byte("gantry-kek-id\x00"), key...))
	return hex.EncodeToString(h[:8])
}

// NewKeyring returns a keyring that seals with primary and opens with primary or any of
// old. Every key must be KeySize bytes.
func NewKeyring(primary []byte, old ...[]byte) (*Keyring, error) {
	k := &Keyring{byID: map[string]*kek{}}
	for i, key := range append([][]byte{primary}, old...) {
		if len(key) != KeySize {
			return nil, fmt.Errorf("secret: key-encryption key %d is %d bytes; it must be %d", i+1, len(key), KeySize)
		}
		aead, err := newAEAD(key)
		if err != nil {
			return nil, err
		}
		e := &kek{id: KeyID(key), aead: aead}
		if i == 0 {
			k.primary = e
		}
		k.byID[e.id] = e
	}
	return k, nil
}

// PrimaryID is the id of the key new values are sealed with.
func (k *Keyring) PrimaryID() string { return k.primary.id }

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	return aead, nil
}

func seal(aead cipher.AEAD, plaintext, ad []byte) ([]byte, error) {
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("secret: read random nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plaintext, ad), nil
}

func open(aead cipher.AEAD, sealed, ad []byte) ([]byte, error) {
	n := aead.NonceSize()
	if len(sealed) < n+aead.Overhead() {
		return nil, ErrDecrypt
	}
	out, err := aead.Open(nil, sealed[:n], sealed[n:], ad)
	if err != nil {
		return nil, ErrDecrypt
	}
	return out, nil
}

// Seal encrypts value for scope under a fresh data key wrapped by the primary key.
func (k *Keyring) Seal(value []byte, scope Scope) (Sealed, error) {
	dk := make([]byte, KeySize)
	if _, err := rand.Read(dk); err != nil {
		return Sealed{}, fmt.Errorf("secret: make data key: %w", err)
	}
	defer clear(dk)
	aead, err := newAEAD(dk)
	if err != nil {
		return Sealed{}, err
	}
	ct, err := seal(aead, value, scope.ad("value"))
	if err != nil {
		return Sealed{}, err
	}
	wrapped, err := seal(k.primary.aead, dk, k.wrapAD(k.primary.id, scope))
	if err != nil {
		return Sealed{}, err
	}
	return Sealed{KeyID: k.primary.id, WrappedKey: wrapped, Ciphertext: ct}, nil
}

func (k *Keyring) wrapAD(id string, scope Scope) []byte {
	return append(scope.ad("data-key"), "\x00"+id...)
}

func (k *Keyring) unwrap(s Sealed, scope Scope) ([]byte, error) {
	e, ok := k.byID[s.KeyID]
	if !ok {
		return nil, fmt.Errorf("%w: its data key is wrapped by key %s, which this keyring does not hold", ErrDecrypt, s.KeyID)
	}
	dk, err := open(e.aead, s.WrappedKey, k.wrapAD(s.KeyID, scope))
	if err != nil || len(dk) != KeySize {
		return nil, ErrDecrypt
	}
	return dk, nil
}

// Open decrypts a value sealed for scope. Any change to the stored bytes, or a scope
// other than the one it was sealed for, is ErrDecrypt.
func (k *Keyring) Open(s Sealed, scope Scope) ([]byte, error) {
	dk, err := k.unwrap(s, scope)
	if err != nil {
		return nil, err
	}
	defer clear(dk)
	aead, err := newAEAD(dk)
	if err != nil {
		return nil, err
	}
	return open(aead, s.Ciphertext, scope.ad("value"))
}

// Rewrap wraps s's data key under the primary key; the value's ciphertext is unchanged.
// It reports false, changing nothing, when the primary key already wraps it.
func (k *Keyring) Rewrap(s Sealed, scope Scope) (Sealed, bool, error) {
	if s.KeyID == k.primary.id {
		return s, false, nil
	}
	dk, err := k.unwrap(s, scope)
	if err != nil {
		return s, false, err
	}
	defer clear(dk)
	wrapped, err := seal(k.primary.aead, dk, k.wrapAD(k.primary.id, scope))
	if err != nil {
		return s, false, err
	}
	return Sealed{KeyID: k.primary.id, WrappedKey: wrapped, Ciphertext: s.Ciphertext}, true, nil
}

// ParseKey reads a key-encryption key: 32 raw bytes, or their base64 (standard or URL
// alphabet, padded or not) with surrounding white space.
func ParseKey(b []byte) ([]byte, error) {
	if len(b) == KeySize {
		return append([]byte(nil), b...), nil
	}
	s := strings.TrimSpace(string(b))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == KeySize {
			return k, nil
		}
	}
	return nil, fmt.Errorf("secret: a key-encryption key is %d random bytes, raw or in base64", KeySize)
}

// LoadKeyFile reads a key file. A file that group or others may read is refused: the
// key opens every secret.
func LoadKeyFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read secrets key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("read secrets key file %s: mode %v lets others read it; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read secrets key file: %w", err)
	}
	k, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("read secrets key file %s: %w", path, err)
	}
	return k, nil
}

// EnsureKeyFile loads path, first creating it (mode 0600, a fresh random key in base64)
// when it does not exist.
func EnsureKeyFile(path string) ([]byte, error) {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return LoadKeyFile(path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create secrets key file: %w", err)
	}
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("create secrets key file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another process made it first: use theirs.
		return LoadKeyFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("create secrets key file: %w", err)
	}
	_, werr := f.WriteString(base64.StdEncoding.EncodeToString(k) + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("create secrets key file: %w", err)
	}
	return k, nil
}

// LoadKey returns the key-encryption key from path when set, else from GANTRY_SECRETS_KEY;
// ErrNoKey when neither is set.
func LoadKey(path string) ([]byte, error) {
	if path != "" {
		return LoadKeyFile(path)
	}
	if v := os.Getenv(EnvKey); v != "" {
		k, err := ParseKey([]byte(v))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", EnvKey, err)
		}
		return k, nil
	}
	return nil, ErrNoKey
}
