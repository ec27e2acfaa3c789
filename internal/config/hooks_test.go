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
