package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// Cookie names. The session cookie holds a sealed session; the sign-in
// cookie holds the double-submit token of the sign-in form (there is no
// session yet to tie a synchronizer token to).
const (
	SessionCookie = "rollcall_session"
	SignInCookie  = "rollcall_signin"
)

// DefaultSessionTTL is how long a console session lasts from sign-in
// (absolute, not sliding).
const DefaultSessionTTL = 12 * time.Hour

// session is what the sealed cookie carries. ID names the server-side
// session row (app.Service.StartConsoleSession): every request checks that
// row, its token and its person, so sign-out, revoking that token or
// deactivating the person ends the session on every instance at once, and
// a copied cookie stops working with it (design: Console sessions).
type session struct {
	PersonID string `json:"p"`
	ID       string `json:"s"`
	CSRF     string `json:"c"` // synchronizer token of this session (base64url, 256 bits)
	Expires  int64  `json:"e"` // unix seconds
}

// sealer seals sessions into cookie values with AES-256-GCM: the value is
// base64url(nonce ‖ ciphertext), authenticated with the cookie name as
// additional data. Any instance holding the same key opens any instance's
// cookie, so no session state is kept on the server.
type sealer struct{ aead cipher.AEAD }

// newSealer derives the AES key as SHA-256 of secret; nil or empty secret
// makes a random key (sessions then end when the process restarts and are
// not understood by other instances).
func newSealer(secret []byte) (*sealer, error) {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
	}
	key := sha256.Sum256(secret)
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(v session) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(SessionCookie))), nil
}

var errBadSession = errors.New("console session cookie is not valid")

// open returns the session of a cookie value, or errBadSession when it was
// not sealed with this key, was altered, or has expired at now.
func (s *sealer) open(value string, now time.Time) (session, error) {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return session{}, errBadSession
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(SessionCookie))
	if err != nil {
		return session{}, errBadSession
	}
	var v session
	if json.Unmarshal(plain, &v) != nil || v.PersonID == "" || v.ID == "" || v.CSRF == "" || now.Unix() >= v.Expires {
		return session{}, errBadSession
	}
	return v, nil
}

// randomToken returns 256 random bits as base64url.
func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("console: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sameToken compares two tokens in constant time; empty never matches.
func sameToken(a, b string) bool {
	return a != "" && b != "" && hmac.Equal([]byte(a), []byte(b))
}
