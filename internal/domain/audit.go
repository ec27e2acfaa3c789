package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// AuditEntry is one row of the append-only, hash-chained audit log
// (design: Audit chain). Hash = hex(SHA-256(PrevHash "\n" canonical body)),
// where the canonical body is Seq, At (RFC 3339, µs, UTC), Actor, Action,
// AgentID, Decision and Data joined by newlines. The first entry's PrevHash is
// "".
type AuditEntry struct {
	Seq      int64           `json:"seq"`
	At       time.Time       `json:"at"`
	Actor    string          `json:"actor"`  // "operator:<id>", "agent:<id>", "system"
	Action   string          `json:"action"` // e.g. "agent.vend", "agent.revoke"
	AgentID  string          `json:"agent_id,omitempty"`
	Decision string          `json:"decision"` // "allow" or "deny"
	Data     json.RawMessage `json:"data,omitempty"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// AuditRecord is what a use case asks the store to append; the store assigns
// Seq, PrevHash and Hash inside the same transaction as the change it records.
type AuditRecord struct {
	Actor    string
	Action   string
	AgentID  string
	Decision string // "" means "allow"
	Data     any    // marshalled with encoding/json; nil for none
}

// AuditHash computes the chain hash of e given its PrevHash.
func AuditHash(e AuditEntry) string {
	h := sha256.New()
	h.Write([]byte(e.PrevHash))
	h.Write([]byte{'\n'})
	h.Write([]byte(strconv.FormatInt(e.Seq, 10)))
	h.Write([]byte{'\n'})
	h.Write([]byte(e.At.UTC().Format("2006-01-02T15:04:05.000000Z07:00")))
	for _, s := range []string{e.Actor, e.Action, e.AgentID, e.Decision, string(e.Data)} {
		h.Write([]byte{'\n'})
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AuditVerifyResult reports a chain verification (design: Audit chain): OK is
// false when any break was found; Checked counts the entries read; Warnings
// names each break by sequence number.
type AuditVerifyResult struct {
	OK       bool     `json:"ok"`
	Checked  int      `json:"checked"`
	Warnings []string `json:"warnings"`
}

// AuditVerifier checks entries fed in ascending Seq order; it keeps O(1)
// state so the store can stream the log through it.
//
// A scoped verifier (NewAuditVerifier) still walks the whole chain, but
// counts and names only the entries of its agents: a break among other
// entries adds the single warning AuditBreakElsewhere, so a member learns
// that the chain is broken but nothing about other persons' activity.
type AuditVerifier struct {
	res      AuditVerifyResult
	prevHash string
	prevSeq  int64
	started  bool

	scoped    bool
	visible   map[string]bool
	elsewhere bool
}

// AuditBreakElsewhere is the one warning a scoped verification gives for
// breaks among entries outside its scope.
const AuditBreakElsewhere = "the chain has breaks among entries you cannot see; an admin can run the verification for details"

// NewAuditVerifier returns a verifier; scoped = count and name only the
// entries whose AgentID is in agentIDs.
func NewAuditVerifier(scoped bool, agentIDs []string) *AuditVerifier {
	v := &AuditVerifier{scoped: scoped, visible: map[string]bool{}}
	for _, id := range agentIDs {
		v.visible[id] = true
	}
	return v
}

// Add checks one entry against the chain so far.
func (v *AuditVerifier) Add(e AuditEntry) {
	seen := !v.scoped || (e.AgentID != "" && v.visible[e.AgentID])
	var warn []string
	if v.started && e.Seq != v.prevSeq+1 {
		warn = append(warn, "seq "+strconv.FormatInt(e.Seq, 10)+": gap after seq "+strconv.FormatInt(v.prevSeq, 10))
	}
	if e.PrevHash != v.prevHash {
		warn = append(warn, "seq "+strconv.FormatInt(e.Seq, 10)+": prev_hash does not match the previous entry's hash")
	}
	if AuditHash(e) != e.Hash {
		warn = append(warn, "seq "+strconv.FormatInt(e.Seq, 10)+": hash does not match the entry's contents (tampered)")
	}
	if seen {
		v.res.Checked++
		v.res.Warnings = append(v.res.Warnings, warn...)
	} else if len(warn) > 0 {
		v.elsewhere = true
	}
	v.prevHash, v.prevSeq, v.started = e.Hash, e.Seq, true
}

// Result returns the verification result so far.
func (v *AuditVerifier) Result() AuditVerifyResult {
	r := v.res
	r.Warnings = append([]string(nil), r.Warnings...)
	if v.elsewhere {
		r.Warnings = append(r.Warnings, AuditBreakElsewhere)
	}
	r.OK = len(r.Warnings) == 0
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	return r
}
