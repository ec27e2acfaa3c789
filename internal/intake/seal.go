package intake

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Hook secrets sealed at rest (design: Hook secrets sealed at rest): with
// hooks.secret_key set, every hook secret is sealed with AES-256-GCM
// before the store writes it and opened after it reads it, so a copy of
// the database (a backup, a replica, a leaked dump) does not let anyone
// sign deliveries. The stored form is
//
//	sealed:v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>
//
// where the key id (8 hex digits derived from the key, never the key)
// names the key that sealed it, and the hook id is the additional data, so
// a sealed secret copied onto another hook does not open. A stored secret
// without the prefix is plaintext (written before a key was configured, or
// with none configured); it reads as is, and the app seals it at start.

// sealPrefix starts every sealed secret.
const sealPrefix = "sealed:v1:"

// MinSecretKeyLen is the shortest accepted hooks.secret_key (and
// hooks.secret_key_previous): 32 characters, e.g. `openssl rand -base64 32`.
const MinSecretKeyLen = 32

// Errors of opening a sealed secret.
var (
	// ErrNoSecretKey: a secret is sealed and no key is configured.
	ErrNoSecretKey = errors.New("the hook secret is sealed and hooks.secret_key is not set")
	// ErrUnknownSecretKey: the secret was sealed with a key that is neither
	// hooks.secret_key nor hooks.secret_key_previous.
	ErrUnknownSecretKey = errors.New("the hook secret was sealed with a key that is neither hooks.secret_key nor hooks.secret_key_previous")
	// ErrSealBroken: the sealed secret does not open with the key its id
	// names (the stored value was altered or belongs to another hook).
	ErrSealBroken = errors.New("the sealed hook secret does not open: altered, or copied from another hook")
)

// Sealer seals and opens hook secrets with the configured key and, during
// a rotation, opens those of the previous key. The nil *Sealer (no key
// configured) stores secrets in plaintext and opens no sealed one. Safe
// for concurrent use.
type Sealer struct {
	current, previous *sealKey
}

type sealKey struct {
	id   string
	aead cipher.AEAD
}

// NewSealer returns the sealer of key (hooks.secret_key) that also opens
// secrets sealed with previous (hooks.secret_key_previous, "" = none). key
// "" returns nil (plaintext; previous must then be ""). Errors: a key
// shorter than MinSecretKeyLen, previous without key, previous equal to
// key.
func NewSealer(key, previous string) (*Sealer, error) {
	if key == "" {
		if previous != "" {
			return nil, errors.New("hooks.secret_key_previous is set without hooks.secret_key: set the new key as hooks.secret_key")
		}
		return nil, nil
	}
	cur, err := newSealKey("hooks.secret_key", key)
	if err != nil {
		return nil, err
	}
	s := &Sealer{current: cur}
	if previous != "" {
		if previous == key {
			return nil, errors.New("hooks.secret_key_previous equals hooks.secret_key: set it to the key being replaced, or leave it empty")
		}
		if s.previous, err = newSealKey("hooks.secret_key_previous", previous); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func newSealKey(name, key string) (*sealKey, error) {
	if len(key) < MinSecretKeyLen {
		return nil, fmt.Errorf("%s must be at least %d characters (e.g. the output of `openssl rand -base64 32`), got %d", name, MinSecretKeyLen, len(key))
	}
	// HKDF-SHA256 turns the configured text into the AES-256 key and,
	// with other info, into the key id, so the id reveals nothing of it.
	k, err := hkdf.Key(sha256.New, []byte(key), nil, "rollcall hook secret seal v1", 32)
	if err != nil {
		return nil, err
	}
	idb, err := hkdf.Key(sha256.New, []byte(key), nil, "rollcall hook secret key id v1", 4)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealKey{id: hex.EncodeToString(idb), aead: aead}, nil
}

// KeyID returns the id of the current key ("" for the nil Sealer), the
// one sealed secrets carry.
func (s *Sealer) KeyID() string {
	if s == nil {
		return ""
	}
	return s.current.id
}

// Seal returns the stored form of the secret of hook hookID: sealed with
// the current key, or the secret itself for the nil Sealer.
func (s *Sealer) Seal(hookID, secret string) string {
	if s == nil {
		return secret
	}
	nonce := make([]byte, s.current.aead.NonceSize(), s.current.aead.NonceSize()+len(secret)+s.current.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("rollcall: crypto/rand failed: " + err.Error())
	}
	out := s.current.aead.Seal(nonce, nonce, []byte(secret), []byte(hookID))
	return sealPrefix + s.current.id + ":" + base64.RawURLEncoding.EncodeToString(out)
}

// IsSealed reports whether stored is a sealed secret, and the id of the
// key that sealed it.
func IsSealed(stored string) (keyID string, sealed bool) {
	rest, ok := strings.CutPrefix(stored, sealPrefix)
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(rest, ":")
	return id, true
}

// Open returns the secret of hook hookID from its stored form: a plaintext
// one as is, a sealed one opened with the key its id names. Errors:
// ErrNoSecretKey, ErrUnknownSecretKey (with the key id), ErrSealBroken.
func (s *Sealer) Open(hookID, stored string) (string, error) {
	id, sealed := IsSealed(stored)
	if !sealed {
		return stored, nil
	}
	if s == nil {
		return "", fmt.Errorf("hook %s: %w", hookID, ErrNoSecretKey)
	}
	k := s.current
	if id != k.id {
		if s.previous == nil || id != s.previous.id {
			return "", fmt.Errorf("hook %s, key id %s (hooks.secret_key is %s): %w", hookID, id, s.current.id, ErrUnknownSecretKey)
		}
		k = s.previous
	}
	raw, err := base64.RawURLEncoding.DecodeString(stored[len(sealPrefix)+len(id)+1:])
	if err != nil || len(raw) < k.aead.NonceSize() {
		return "", fmt.Errorf("hook %s: %w", hookID, ErrSealBroken)
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, raw[:n], raw[n:], []byte(hookID))
	if err != nil {
		return "", fmt.Errorf("hook %s: %w", hookID, ErrSealBroken)
	}
	return string(plain), nil
}

// NeedsSeal reports whether stored should be (re)sealed: the sealer has a
// key and stored is plaintext or sealed with another key.
func (s *Sealer) NeedsSeal(stored string) bool {
	if s == nil {
		return false
	}
	id, sealed := IsSealed(stored)
	return !sealed || id != s.current.id
}
