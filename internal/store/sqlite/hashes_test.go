package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The set of known hashes survives a restart (Open loads it), so a token
// stored by an earlier run still may authenticate, and a hash never stored
// is refused without a statement.
func TestKnownHashesLoadedAtOpen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "rollcall.db")
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	admin := domain.Person{ID: "p-1", Name: "admin", Admin: true, CreatedAt: now}
	if _, err := s.BootstrapAdmin(ctx, store.BootstrapAdminParams{Person: admin, TokenHash: "hash-stored"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.hashes.has("hash-stored") {
		t.Fatal("the stored token's hash is not in the set after a reopen")
	}
	for hash, want := range map[string]bool{"hash-stored": true, "hash-never-stored": false} {
		if ok, err := s.TokenMayAuthenticate(ctx, hash, now.Add(time.Minute)); err != nil || ok != want {
			t.Errorf("TokenMayAuthenticate(%s) = %v, %v; want %v", hash, ok, err, want)
		}
	}
}
