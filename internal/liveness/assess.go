package liveness

import "time"

// Warning codes of the agent status (AgentRuntimeStatus.warnings), in the
// order Assess returns them (design: Warnings).
const (
	WarnBillingModeMismatch    = "billing_mode_mismatch"
	WarnBillingModeUnsupported = "billing_mode_unsupported"
	WarnBillingEvidenceUnknown = "billing_evidence_unknown"
	WarnToolClassMismatch      = "tool_class_mismatch"
)

// AssessInputs is what Assess judges: the agent's liveness state, what its
// owner configured, what its last heartbeat reported, and the tracker's
// memory of when differences began.
type AssessInputs struct {
	// State is the liveness state now (StateAt).
	State string
	// BillingMode and ToolClass are the configured values; "" = not
	// configured, which disables the comparisons that need them.
	BillingMode string
	ToolClass   string
	// Reported values of the last heartbeat (nil = not reported).
	ReportedBillingMode           *string
	ReportedBillingModesSupported []string
	ReportedToolClass             *string
	Evidence                      *BillingEvidence
	// MismatchSince is when the current difference of any kind began (the
	// previous Assessment.MismatchSince); nil = none.
	MismatchSince *time.Time
	// ModeMismatchSince is when the current difference of kind (a) began
	// (the previous Assessment.ModeMismatchSince); nil = none.
	ModeMismatchSince *time.Time
	// AlertAfter is billing.mismatch_alert_after.
	AlertAfter time.Duration
}

// Assessment is the result of Assess.
type Assessment struct {
	// Warnings is a subset of, in this order, WarnBillingModeMismatch,
	// WarnBillingModeUnsupported, WarnBillingEvidenceUnknown,
	// WarnToolClassMismatch. Never nil (empty when there is none).
	Warnings []string
	// Differs reports a difference of kind (a), (b) or (c) (design: Warnings); the
	// tool class is not one of them.
	Differs bool
	// MismatchSince is when the difference of any kind began: the input's
	// value while Differs continues, now when it begins, nil without a
	// difference. Keep it for the next Assess.
	MismatchSince *time.Time
	// ModeMismatchSince is the same for kind (a) alone, which times the
	// warning billing_mode_mismatch. Keep it for the next Assess.
	ModeMismatchSince *time.Time
}

// Assess returns the warnings of an agent at now (design: Warnings, Mismatch age).
// While the state is online or degraded, the kinds
// of difference are:
//
//	(a) a reported billing mode that is not the configured one;
//	(b) no reported billing mode, but a reported billing_modes_supported
//	    (also an empty one): the mode could not be determined, which counts
//	    as unequal to every configured mode;
//	(c) billing_evidence.key_type = "unknown".
//
// (a) and (b) need a configured billing mode: with none there is nothing to
// differ from. Warnings: billing_mode_mismatch once (a) has held for longer
// than AlertAfter (strictly; timed from ModeMismatchSince),
// billing_mode_unsupported for (b) and billing_evidence_unknown for (c) at
// once, and tool_class_mismatch while a reported tool class is not the
// configured one (needs a configured tool class). While offline or unknown
// there is no warning and no difference, so the times restart when the
// agent comes back.
func Assess(in AssessInputs, now time.Time) Assessment {
	out := Assessment{Warnings: []string{}}
	if in.State != StateOnline && in.State != StateDegraded {
		return out
	}
	modeMismatch := in.BillingMode != "" && in.ReportedBillingMode != nil && *in.ReportedBillingMode != in.BillingMode
	unsupported := in.BillingMode != "" && in.ReportedBillingMode == nil && in.ReportedBillingModesSupported != nil
	evidenceUnknown := in.Evidence != nil && in.Evidence.KeyType == KeyTypeUnknown
	toolMismatch := in.ToolClass != "" && in.ReportedToolClass != nil && *in.ReportedToolClass != in.ToolClass

	out.Differs = modeMismatch || unsupported || evidenceUnknown
	if out.Differs {
		out.MismatchSince = since(in.MismatchSince, now)
	}
	if modeMismatch {
		out.ModeMismatchSince = since(in.ModeMismatchSince, now)
		if now.Sub(*out.ModeMismatchSince) > in.AlertAfter {
			out.Warnings = append(out.Warnings, WarnBillingModeMismatch)
		}
	}
	if unsupported {
		out.Warnings = append(out.Warnings, WarnBillingModeUnsupported)
	}
	if evidenceUnknown {
		out.Warnings = append(out.Warnings, WarnBillingEvidenceUnknown)
	}
	if toolMismatch {
		out.Warnings = append(out.Warnings, WarnToolClassMismatch)
	}
	return out
}

func since(prev *time.Time, now time.Time) *time.Time {
	if prev != nil {
		return prev
	}
	return &now
}

// MismatchAge returns the value of the gauge
// rollcall.agent.billing_mode.mismatch_age at now: seconds since the
// difference of any kind began, 0 without one (and never negative).
func (a Assessment) MismatchAge(now time.Time) float64 {
	if a.MismatchSince == nil || !now.After(*a.MismatchSince) {
		return 0
	}
	return now.Sub(*a.MismatchSince).Seconds()
}
