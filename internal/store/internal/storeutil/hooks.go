package storeutil

import (
	"encoding/json"
	"fmt"

	"github.com/rollcall/rollcall/internal/domain"
)

// EncodeHandoff renders handoff grants as the stored JSON array ("[]" for
// none).
func EncodeHandoff(g []domain.HandoffGrant) string {
	if len(g) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(g) // plain strings always marshal
	return string(b)
}

// DecodeHandoff parses the stored JSON array; none → nil.
func DecodeHandoff(s string) ([]domain.HandoffGrant, error) {
	var g []domain.HandoffGrant
	if err := json.Unmarshal([]byte(s), &g); err != nil {
		return nil, fmt.Errorf("store: corrupt handoff grants %q: %w", s, err)
	}
	if len(g) == 0 {
		return nil, nil
	}
	return g, nil
}

// EncodeFilter renders a hook filter as stored JSON.
func EncodeFilter(f domain.HookFilter) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// DecodeFilter parses a stored hook filter.
func DecodeFilter(s string) (domain.HookFilter, error) {
	var f domain.HookFilter
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return f, fmt.Errorf("store: corrupt hook filter %q: %w", s, err)
	}
	return f, nil
}
