package intake

import (
	"errors"
	"strings"
	"testing"
)

var (
	keyA = strings.Repeat("a", 32)
	keyB = "b-0123456789abcdefghijklmnopqrstuvwxyz"
)

// TestSealRoundTrip (design: Hook secrets sealed at rest): a sealed secret
// is not the plaintext, names the key's id, differs each time (random
// nonce) and opens to the secret; plaintext opens as is; the nil Sealer
// stores plaintext.
func TestSealRoundTrip(t *testing.T) {
	s, err := NewSealer(keyA, "")
	if err != nil {
		t.Fatal(err)
	}
	secret := NewSecret()
	a, b := s.Seal("hook-1", secret), s.Seal("hook-1", secret)
	if a == b || strings.Contains(a, secret) || strings.Contains(a, secret[len("whsec_"):]) {
		t.Fatalf("sealed %q / %q: must differ and not contain the secret", a, b)
	}
	if id, sealed := IsSealed(a); !sealed || id != s.KeyID() || len(id) != 8 || !strings.HasPrefix(a, "sealed:v1:"+id+":") {
		t.Fatalf("sealed form %q: id %q sealed %v, key id %q", a, id, sealed, s.KeyID())
	}
	for _, stored := range []string{a, b} {
		if got, err := s.Open("hook-1", stored); err != nil || got != secret {
			t.Fatalf("Open = %q, %v; want the secret", got, err)
		}
	}
	if got, err := s.Open("hook-1", secret); err != nil || got != secret {
		t.Fatalf("Open(plaintext) = %q, %v", got, err)
	}
	if !s.NeedsSeal(secret) || s.NeedsSeal(a) {
		t.Fatal("NeedsSeal: plaintext needs it, a secret sealed with the key does not")
	}
	var none *Sealer
	if got := none.Seal("hook-1", secret); got != secret || none.NeedsSeal(secret) {
		t.Fatalf("the nil Sealer seals: %q", got)
	}
	if got, err := none.Open("hook-1", secret); err != nil || got != secret {
		t.Fatalf("nil Open(plaintext) = %q, %v", got, err)
	}
}

// TestSealWrongKey: a secret opens only with its key and on its hook; each
// failure says why.
func TestSealWrongKey(t *testing.T) {
	a, _ := NewSealer(keyA, "")
	b, _ := NewSealer(keyB, "")
	stored := a.Seal("hook-1", "whsec_x")
	if _, err := b.Open("hook-1", stored); !errors.Is(err, ErrUnknownSecretKey) || !strings.Contains(err.Error(), a.KeyID()) {
		t.Fatalf("another key: %v; want ErrUnknownSecretKey naming key id %s", err, a.KeyID())
	}
	if _, err := a.Open("hook-2", stored); !errors.Is(err, ErrSealBroken) {
		t.Fatalf("copied onto another hook: %v; want ErrSealBroken", err)
	}
	tampered := stored[:len(stored)-2] + "AA"
	if tampered == stored {
		tampered = stored[:len(stored)-2] + "BB"
	}
	if _, err := a.Open("hook-1", tampered); !errors.Is(err, ErrSealBroken) {
		t.Fatalf("altered: %v; want ErrSealBroken", err)
	}
	var none *Sealer
	if _, err := none.Open("hook-1", stored); !errors.Is(err, ErrNoSecretKey) {
		t.Fatalf("no key: %v; want ErrNoSecretKey", err)
	}
	for _, c := range []struct{ key, prev, want string }{
		{"short", "", "at least 32 characters"},
		{keyA, "short", "hooks.secret_key_previous must be at least 32"},
		{"", keyA, "without hooks.secret_key"},
		{keyA, keyA, "equals hooks.secret_key"},
	} {
		if _, err := NewSealer(c.key, c.prev); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewSealer(%q, %q) = %v; want %q", c.key, c.prev, err, c.want)
		}
	}
}

// TestSealRotation: with the old key as previous, a secret it sealed opens
// and needs resealing; resealed, it carries the new key's id and opens
// without the old key.
func TestSealRotation(t *testing.T) {
	old, _ := NewSealer(keyA, "")
	stored := old.Seal("hook-1", "whsec_x")
	rot, err := NewSealer(keyB, keyA)
	if err != nil {
		t.Fatal(err)
	}
	if !rot.NeedsSeal(stored) {
		t.Fatal("a secret of the previous key needs resealing")
	}
	plain, err := rot.Open("hook-1", stored)
	if err != nil || plain != "whsec_x" {
		t.Fatalf("Open with the previous key = %q, %v", plain, err)
	}
	resealed := rot.Seal("hook-1", plain)
	if id, _ := IsSealed(resealed); id != rot.KeyID() || id == old.KeyID() || rot.NeedsSeal(resealed) {
		t.Fatalf("resealed under key id %s; want %s", id, rot.KeyID())
	}
	after, _ := NewSealer(keyB, "")
	if got, err := after.Open("hook-1", resealed); err != nil || got != "whsec_x" {
		t.Fatalf("after the rotation = %q, %v", got, err)
	}
	if _, err := after.Open("hook-1", stored); !errors.Is(err, ErrUnknownSecretKey) {
		t.Fatalf("the old form after the rotation: %v", err)
	}
}
