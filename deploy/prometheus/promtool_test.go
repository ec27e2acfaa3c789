// Package prometheus holds the Prometheus alerting rules shipped with
// Rollcall (rollcall-alerts.yaml) and their promtool unit tests
// (rollcall-alerts_test.yaml). This Go test runs `promtool check rules` and
// `promtool test rules`; Debian's prometheus package ships promtool.
// Without promtool the test skips, unless ROLLCALL_REQUIRE_PROMTOOL=1 (CI),
// where it fails.
package prometheus

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/metrics"
)

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("ROLLCALL_REQUIRE_PROMTOOL") == "1" {
		t.Fatalf("ROLLCALL_REQUIRE_PROMTOOL=1 but promtool is not installed (apt-get install prometheus): %v", err)
	}
	t.Skipf("promtool not installed (apt-get install prometheus); set ROLLCALL_REQUIRE_PROMTOOL=1 to fail instead")
	return ""
}

func TestPromtoolCheckRules(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", "rollcall-alerts.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

func TestPromtoolTestRules(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", "rollcall-alerts_test.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestRulesReadTheExportedGauge ties the rules to the name the metrics
// adapter exports (internal/metrics pins it against the exporter).
func TestRulesReadTheExportedGauge(t *testing.T) {
	b, err := os.ReadFile("rollcall-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"alert: RollcallBillingModeMismatch", metrics.PromMismatchAge, "severity: page", "by (agent_handle)"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("rollcall-alerts.yaml lacks %q", want)
		}
	}
}

// TestIntakeRuleReadsTheExportedCounter ties the intake alert to the
// counter the metrics adapter exports.
func TestIntakeRuleReadsTheExportedCounter(t *testing.T) {
	b, err := os.ReadFile("rollcall-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"alert: RollcallHookDeliveriesRefused", metrics.PromHookDeliveries + `{outcome="refused"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("rollcall-alerts.yaml lacks %q", want)
		}
	}
}
