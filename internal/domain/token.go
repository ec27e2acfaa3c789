package domain

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"
)

// TokenTouchEvery bounds how often a token's last use is written (per
// token and instance).
const TokenTouchEvery = time.Minute

// HashToken returns the stored form of a token: hex SHA-256. Tokens carry
// 256 random bits, so a fast hash is enough; the plain token is never stored
// or logged.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken returns prefix + 43 characters of base64url (256 random bits).
// It reads crypto/rand, the one source outside its arguments a rule of
// this package uses.
func NewToken(prefix string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("rollcall: crypto/rand failed: " + err.Error())
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}
