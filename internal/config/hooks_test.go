package config

import (
	"strings"
	"testing"
	"time"
)

// TestHookDeliveryRetention: hooks.delivery_retention defaults to 7 days,
// is read from the environment and refuses values below
// MinDeliveryRetention.
func TestHookDeliveryRetention(t *testing.T) {
	c, err := Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hooks.DeliveryRetention != 7*24*time.Hour {
		t.Errorf("default hooks.delivery_retention = %s, want 168h", c.Hooks.DeliveryRetention)
	}
	c, err = Load(nil, []string{"ROLLCALL_HOOKS_DELIVERY_RETENTION=48h"})
	if err != nil || c.Hooks.DeliveryRetention != 48*time.Hour {
		t.Errorf("from the environment: %s, %v; want 48h", c.Hooks.DeliveryRetention, err)
	}
	if _, err := Load(nil, []string{"ROLLCALL_HOOKS_DELIVERY_RETENTION=1h"}); err != nil {
		t.Errorf("1h (the minimum): %v", err)
	}
	_, err = Load(nil, []string{"ROLLCALL_HOOKS_DELIVERY_RETENTION=59m"})
	if err == nil || !strings.Contains(err.Error(), "hooks.delivery_retention must be a duration of at least 1h0m0s") {
		t.Errorf("59m: err = %v, want one naming hooks.delivery_retention and its minimum", err)
	}
}

// TestHookSecretKeys: hooks.secret_key and hooks.secret_key_previous are
// empty by default, read from the environment, and refused shorter than
// MinSecretKeyLen, previous without a key, or previous equal to the key.
func TestHookSecretKeys(t *testing.T) {
	c, err := Load(nil, nil)
	if err != nil || c.Hooks.SecretKey != "" || c.Hooks.SecretKeyPrevious != "" {
		t.Fatalf("defaults: %q %q, %v", c.Hooks.SecretKey, c.Hooks.SecretKeyPrevious, err)
	}
	key, old := strings.Repeat("k", 32), strings.Repeat("o", 40)
	c, err = Load(nil, []string{"ROLLCALL_HOOKS_SECRET_KEY=" + key, "ROLLCALL_HOOKS_SECRET_KEY_PREVIOUS=" + old})
	if err != nil || c.Hooks.SecretKey != key || c.Hooks.SecretKeyPrevious != old {
		t.Fatalf("from the environment: %q %q, %v", c.Hooks.SecretKey, c.Hooks.SecretKeyPrevious, err)
	}
	for _, bad := range []struct {
		env  []string
		want string
	}{
		{[]string{"ROLLCALL_HOOKS_SECRET_KEY=short"}, "hooks.secret_key must be at least 32 characters"},
		{[]string{"ROLLCALL_HOOKS_SECRET_KEY=" + key, "ROLLCALL_HOOKS_SECRET_KEY_PREVIOUS=short"}, "hooks.secret_key_previous must be at least 32 characters"},
		{[]string{"ROLLCALL_HOOKS_SECRET_KEY_PREVIOUS=" + old}, "hooks.secret_key_previous is set without hooks.secret_key"},
		{[]string{"ROLLCALL_HOOKS_SECRET_KEY=" + key, "ROLLCALL_HOOKS_SECRET_KEY_PREVIOUS=" + key}, "hooks.secret_key_previous equals hooks.secret_key"},
	} {
		if _, err := Load(nil, bad.env); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: err = %v, want %q", bad.env, err, bad.want)
		}
	}
}
