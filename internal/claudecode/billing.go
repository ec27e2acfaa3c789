package claudecode

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/liveness"
)

// Billing modes the adapter reports (billing_mode; design: Billing evidence)
// for each billing_evidence.key_type.
const (
	BillingModeAPI          = "api"          // key_type api_key: pay per token with an API key
	BillingModeSubscription = "subscription" // key_type oauth: a claude.ai plan
	BillingModeCloud        = "cloud"        // key_type cloud: Bedrock, Vertex AI or Foundry
)

// Evidence is what Billing found: the evidence and the billing mode it
// implies ("" for key_type unknown: no mode reported).
type Evidence struct {
	liveness.BillingEvidence
	Mode string
}

// AuthStatus is the part of `claude auth status --json` Billing reads. The
// command prints more (an email, an organisation); it is never kept or sent.
type AuthStatus struct {
	LoggedIn    bool   `json:"loggedIn"`
	AuthMethod  string `json:"authMethod"`  // "api_key", "claude.ai", "none", …
	APIProvider string `json:"apiProvider"` // "firstParty", "bedrock", "vertex", "foundry"
}

// cloudEnv are the switches that send Claude Code to a cloud provider.
var cloudEnv = []string{"CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"}

// Billing determines the billing evidence of a Claude Code session from its
// environment (lookup: os.LookupEnv of the session's environment) and, when
// the environment says nothing, from status (the session's `claude auth
// status`; nil = not available). Only whether a variable is set and
// non-empty is looked at, never its value beyond that, so no secret is read
// into the result. In order:
//
//   - a cloud switch (CLAUDE_CODE_USE_BEDROCK/VERTEX/FOUNDRY) set and not
//     "0"/"false" → cloud, method env, mode cloud;
//   - ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN set → api_key, method env,
//     mode api;
//   - CLAUDE_CODE_OAUTH_TOKEN set → oauth, method env, mode subscription;
//   - auth status: a provider other than firstParty → cloud; authMethod
//     api_key → api_key; claude.ai (or any oauth method) → oauth; each with
//     method auth_status;
//   - else unknown, method none, no mode.
func Billing(lookup func(string) (string, bool), status *AuthStatus) Evidence {
	set := func(k string) bool {
		v, ok := lookup(k)
		v = strings.TrimSpace(v)
		return ok && v != ""
	}
	for _, k := range cloudEnv {
		if v, ok := lookup(k); ok && v != "" && v != "0" && !strings.EqualFold(v, "false") {
			return Evidence{liveness.BillingEvidence{KeyType: "cloud", Method: "env"}, BillingModeCloud}
		}
	}
	if set("ANTHROPIC_API_KEY") || set("ANTHROPIC_AUTH_TOKEN") {
		return Evidence{liveness.BillingEvidence{KeyType: "api_key", Method: "env"}, BillingModeAPI}
	}
	if set("CLAUDE_CODE_OAUTH_TOKEN") {
		return Evidence{liveness.BillingEvidence{KeyType: "oauth", Method: "env"}, BillingModeSubscription}
	}
	if status != nil && status.LoggedIn {
		switch p := strings.ToLower(status.APIProvider); {
		case p != "" && p != "firstparty":
			return Evidence{liveness.BillingEvidence{KeyType: "cloud", Method: "auth_status"}, BillingModeCloud}
		case status.AuthMethod == "api_key":
			return Evidence{liveness.BillingEvidence{KeyType: "api_key", Method: "auth_status"}, BillingModeAPI}
		case status.AuthMethod == "claude.ai" || strings.Contains(status.AuthMethod, "oauth"):
			return Evidence{liveness.BillingEvidence{KeyType: "oauth", Method: "auth_status"}, BillingModeSubscription}
		}
	}
	return Evidence{BillingEvidence: liveness.BillingEvidence{KeyType: liveness.KeyTypeUnknown, Method: "none"}}
}

// ReadAuthStatus runs `<claude> auth status --json` within timeout and
// decodes the members of AuthStatus; nil when the command is missing, fails
// without printing JSON, or the installed version lacks it. (It exits 1
// when logged out but still prints the JSON.)
func ReadAuthStatus(ctx context.Context, claude string, env []string, timeout time.Duration) *AuthStatus {
	if claude == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "auth", "status", "--json")
	cmd.Env = env
	out, _ := cmd.Output()
	var st AuthStatus
	if i := strings.IndexByte(string(out), '{'); i < 0 || json.Unmarshal(out[i:], &st) != nil {
		return nil
	}
	return &st
}

// ReadVersion runs `<claude> --version` ("2.1.328 (Claude Code)") and returns
// the version if it has the version form (design: Value forms), else "".
func ReadVersion(ctx context.Context, claude string, env []string, timeout time.Duration) string {
	if claude == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	f := strings.Fields(string(out))
	if len(f) == 0 || !versionRE.MatchString(f[0]) || len(f[0]) > liveness.MaxVersionLen {
		return ""
	}
	return f[0]
}
