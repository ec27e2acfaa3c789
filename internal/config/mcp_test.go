package config

import (
	"strings"
	"testing"
	"time"
)

// TestMCPPingKeys: mcp.ping_interval and mcp.ping_timeout default to 10 s
// and 5 s, are read from the environment, and refuse values below MinDuration.
func TestMCPPingKeys(t *testing.T) {
	c, err := Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MCP.PingInterval != 10*time.Second || c.MCP.PingTimeout != 5*time.Second {
		t.Errorf("defaults: mcp = %+v, want ping_interval 10s, ping_timeout 5s", c.MCP)
	}
	c, err = Load(nil, []string{"ROLLCALL_MCP_PING_INTERVAL=3s", "ROLLCALL_MCP_PING_TIMEOUT=2s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MCP.PingInterval != 3*time.Second || c.MCP.PingTimeout != 2*time.Second {
		t.Errorf("from the environment: mcp = %+v, want 3s and 2s", c.MCP)
	}
	_, err = Load(nil, []string{"ROLLCALL_MCP_PING_TIMEOUT=5ms"})
	if err == nil || !strings.Contains(err.Error(), "mcp.ping_timeout") {
		t.Errorf("below MinDuration: err = %v, want one naming mcp.ping_timeout", err)
	}
}
