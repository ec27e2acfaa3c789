package liveness

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/strictjson"
)

// The decoder is a single left-to-right walk over the body that parses only
// the members of agent_heartbeat.v1 and stops at the first violation. It is
// a strict RFC 8259 parser for everything it consumes, so a body it accepts
// is well-formed JSON. When the walk stops with an error, the strict-JSON
// layer checks the whole body once (strictjson.Heartbeat.Malformed): a
// malformed body is reported as such (with the byte offset) in preference
// to any other error. The happy path allocates only the values it returns.
//
// Why not the strict-JSON layer's Decode (github.com/go-json-experiment/json)
// like the other bodies: on the heartbeat hot path it is measured 3 to 4
// times slower and allocates 4 times as often as this walk, before any of
// the forms are checked (docs/benchmarks.md, One strict-JSON layer); the
// goal is at most 1.5 times. The texts of its errors that the contracts
// share (unknown and repeated members, malformed bodies) come from
// strictjson, and its tests and fuzz target hold it to the same rules.

type decoder struct {
	b     []byte
	i     int
	share string // a copy of b shared by the returned strings, when b is small
	a     *arena
}

// shareLimit is the largest body whose returned strings share one copy of
// the body (one allocation instead of one per string). Larger bodies get one
// copy per string, so a padded body is never retained.
const shareLimit = 2048

// arena holds the values the pointers of a Heartbeat point at, so a decode
// allocates them at once.
type arena struct {
	billingMode, toolClass, runtimeVersion string
	evidence                               BillingEvidence
	caps                                   Capabilities
	followups                              string
	bools                                  [4]bool
	adapter                                Adapter
	adapterVersion                         string
	runtime                                Runtime
	protocolVersion                        int
}

func (d *decoder) arena() *arena {
	if d.a == nil {
		d.a = new(arena)
	}
	return d.a
}

func decode(body []byte) (Heartbeat, *domain.Error) {
	if len(body) > MaxBodyBytes {
		return Heartbeat{}, domain.Errorf(domain.CodeInvalidArgument,
			"the body has %d bytes; at most %d are allowed", len(body), MaxBodyBytes)
	}
	d := decoder{b: body}
	var h Heartbeat
	err := d.top(&h)
	if err == nil {
		return h, nil
	}
	if e := strictjson.Heartbeat.Malformed(body); e != nil {
		return Heartbeat{}, e
	}
	return Heartbeat{}, err
}

// ---- pointers and errors ----

func invalid(format string, args ...any) *domain.Error {
	return domain.Errorf(domain.CodeInvalidArgument, format, args...)
}

// syntax reports malformed JSON at the cursor. decode replaces it with the
// report of encoding/json, which agrees with the walk on what is malformed.
func (d *decoder) syntax() *domain.Error {
	return invalid("malformed JSON at byte offset %d", d.i)
}

// escapeToken escapes one RFC 6901 reference token.
func escapeToken(s string) string { return strictjson.Escape(s) }

func elemPtr(base string, i int) string { return base + "/" + strconv.Itoa(i) }

// unknownMember reports key as unknown_member at base/key.
func unknownMember(base string, key []byte) *domain.Error {
	k := validUTF8(key)
	return strictjson.Heartbeat.Unknown(k, base+"/"+escapeToken(k), nil)
}

func duplicateKey(ptr, key string) *domain.Error {
	return strictjson.Heartbeat.Duplicate(key, ptr)
}

func missing(ptr, key string) *domain.Error {
	return invalid("required member %q is missing", key).At(ptr)
}

// once marks bit in *seen, or reports the duplicate key at base/key.
func once(seen *uint16, bit uint16, base, key string) *domain.Error {
	if *seen&bit != 0 {
		return duplicateKey(base+"/"+escapeToken(key), key)
	}
	*seen |= bit
	return nil
}

func kindName(c byte) string {
	switch c {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func isValueStart(c byte) bool {
	switch c {
	case '"', '{', '[', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// want checks that the value at the cursor starts with c (after
// whitespace); otherwise it reports the wrong type (or malformed JSON).
func (d *decoder) want(c byte, what string) *domain.Error {
	d.ws()
	if d.i >= len(d.b) || !isValueStart(d.b[d.i]) {
		return d.syntax()
	}
	if got := d.b[d.i]; got != c {
		return invalid("must be %s, not %s", what, kindName(got))
	}
	return nil
}

// ---- lexical level ----

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next advances inside an object (end '}') or array (end ']') whose opening
// bracket was consumed: it reports whether another member or element
// follows, consuming the separating comma or the closing bracket.
func (d *decoder) next(first *bool, end byte) (bool, *domain.Error) {
	d.ws()
	if d.i >= len(d.b) {
		return false, d.syntax()
	}
	c := d.b[d.i]
	if *first {
		*first = false
		if c == end {
			d.i++
			return false, nil
		}
		return true, nil
	}
	switch c {
	case ',':
		d.i++
		d.ws()
		if d.i < len(d.b) && d.b[d.i] == end { // trailing comma
			return false, d.syntax()
		}
		return true, nil
	case end:
		d.i++
		return false, nil
	}
	return false, d.syntax()
}

// str consumes a JSON string at the cursor and returns the bounds of its
// raw content and whether it contains escapes.
func (d *decoder) str() (start, end int, esc bool, err *domain.Error) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return 0, 0, false, d.syntax()
	}
	d.i++
	start = d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			end = d.i
			d.i++
			return start, end, esc, nil
		case c == '\\':
			esc = true
			d.i++
			if d.i >= len(d.b) {
				return 0, 0, false, d.syntax()
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if d.i+4 >= len(d.b) {
					d.i = len(d.b)
					return 0, 0, false, d.syntax()
				}
				for k := 1; k <= 4; k++ {
					if !isHex(d.b[d.i+k]) {
						d.i += k
						return 0, 0, false, d.syntax()
					}
				}
				d.i += 5
			default:
				return 0, 0, false, d.syntax()
			}
		case c < 0x20:
			return 0, 0, false, d.syntax()
		default:
			d.i++
		}
	}
	return 0, 0, false, d.syntax()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// key consumes a member key and the colon after it. The key is returned
// unescaped; it aliases the body when it has no escapes.
func (d *decoder) key() ([]byte, *domain.Error) {
	st, en, esc, err := d.str()
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != ':' {
		return nil, d.syntax()
	}
	d.i++
	if esc {
		return unescape(d.b[st:en]), nil
	}
	return d.b[st:en], nil
}

// unescape decodes the content of a well-formed JSON string as
// encoding/json does: invalid UTF-8 and unpaired surrogates become U+FFFD.
func unescape(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			if c < utf8.RuneSelf {
				out = append(out, c)
				i++
				continue
			}
			r, n := utf8.DecodeRune(raw[i:])
			out = utf8.AppendRune(out, r) // RuneError for invalid bytes
			i += n
			continue
		}
		switch raw[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, hex4(raw[i+2:])); dec != utf8.RuneError {
						r2 = dec
						i += 6
					}
				}
				r = r2
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, raw[i+1])
		}
		i += 2
	}
	return out
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// validUTF8 returns b as a string with every invalid byte replaced by
// U+FFFD, as encoding/json decodes it.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out = utf8.AppendRune(out, r)
		b = b[n:]
	}
	return string(out)
}

// ---- values ----

// text returns the body bytes [st, en) as a string, sharing one copy of a
// small body.
func (d *decoder) text(st, en int) string {
	if len(d.b) > shareLimit {
		return string(d.b[st:en])
	}
	if d.share == "" {
		d.share = string(d.b)
	}
	return d.share[st:en]
}

// formString consumes a string value of form f.
func (d *decoder) formString(f *form) (string, *domain.Error) {
	if err := d.want('"', "a string"); err != nil {
		return "", err
	}
	st, en, esc, err := d.str()
	if err != nil {
		return "", err
	}
	raw := d.b[st:en]
	if esc {
		raw = unescape(raw)
	}
	if !f.match(raw) {
		return "", f.mismatch()
	}
	if esc {
		return string(raw), nil
	}
	return d.text(st, en), nil
}

// enum consumes a string value that must be a or b, and returns the
// constant.
func (d *decoder) enum(a, b string) (string, *domain.Error) {
	if err := d.want('"', "a string"); err != nil {
		return "", err
	}
	st, en, esc, err := d.str()
	if err != nil {
		return "", err
	}
	raw := d.b[st:en]
	if esc {
		raw = unescape(raw)
	}
	switch string(raw) {
	case a:
		return a, nil
	case b:
		return b, nil
	}
	return "", invalid("must be %q or %q", a, b)
}

const notUUID = "must be a UUID (8-4-4-4-12 hexadecimal digits)"

// uuid consumes a UUID string and returns it in lower case.
func (d *decoder) uuid() (string, *domain.Error) {
	if err := d.want('"', "a string"); err != nil {
		return "", err
	}
	st, en, esc, err := d.str()
	if err != nil {
		return "", err
	}
	raw := d.b[st:en]
	if esc {
		raw = unescape(raw)
	}
	if len(raw) != 36 {
		return "", invalid(notUUID)
	}
	upper := false
	for k, c := range raw {
		switch k {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", invalid(notUUID)
			}
			continue
		}
		if !isHex(c) {
			return "", invalid(notUUID)
		}
		upper = upper || 'A' <= c && c <= 'F'
	}
	switch {
	case upper:
		return strings.ToLower(string(raw)), nil
	case esc:
		return string(raw), nil
	}
	return d.text(st, en), nil
}

func (d *decoder) boolean() (bool, *domain.Error) {
	d.ws()
	if d.i >= len(d.b) || !isValueStart(d.b[d.i]) {
		return false, d.syntax()
	}
	switch c := d.b[d.i]; c {
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	default:
		return false, invalid("must be a boolean, not %s", kindName(c))
	}
}

func (d *decoder) literal(lit string) *domain.Error {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return d.syntax()
	}
	d.i += len(lit)
	return nil
}

// positiveInt consumes a JSON integer literal 1..MaxProtocolVersion.
func (d *decoder) positiveInt() (int, *domain.Error) {
	d.ws()
	if d.i >= len(d.b) || !isValueStart(d.b[d.i]) {
		return 0, d.syntax()
	}
	if c := d.b[d.i]; c != '-' && (c < '0' || c > '9') {
		return 0, invalid("must be a positive integer, not %s", kindName(c))
	}
	st := d.i
	for d.i < len(d.b) && ('0' <= d.b[d.i] && d.b[d.i] <= '9') {
		d.i++
	}
	digits := d.b[st:d.i]
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E', '-', '+':
			return 0, invalid("must be a positive integer (no sign, fraction or exponent)")
		}
	}
	if len(digits) == 0 || digits[0] == '0' || len(digits) > 10 {
		return 0, invalid("must be a positive integer from 1 to %d", MaxProtocolVersion)
	}
	n := 0
	for _, c := range digits {
		n = n*10 + int(c-'0')
	}
	if n > MaxProtocolVersion {
		return 0, invalid("must be a positive integer from 1 to %d", MaxProtocolVersion)
	}
	return n, nil
}

// stringList consumes an array of distinct strings read by elem; errors
// point at base/N. A non-nil empty slice is returned for [].
func (d *decoder) stringList(base string, elem func() (string, *domain.Error)) ([]string, *domain.Error) {
	if err := d.want('[', "an array"); err != nil {
		return nil, err.At(base)
	}
	d.i++
	out := []string{}
	var set distinct
	first := true
	for n := 0; ; n++ {
		more, err := d.next(&first, ']')
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		v, err := elem()
		if err != nil {
			return nil, err.At(elemPtr(base, n))
		}
		if seenIn(&set, out, self, v) {
			return nil, invalid("%q is listed twice (first at index %d)", v, indexOf(out, self, v)).At(elemPtr(base, n))
		}
		out = append(grow(out), v)
	}
}

// listCap is the capacity a list gets at its first element: most lists
// of a heartbeat are short, so one allocation usually suffices.
const listCap = 4

func grow[E any](list []E) []E {
	if cap(list) == 0 {
		return make([]E, 0, listCap)
	}
	return list
}

func self(s string) string            { return s }
func queueOf(e ReadinessEntry) string { return e.Queue }

func indexOf[E any](list []E, key func(E) string, v string) int {
	for k, x := range list {
		if key(x) == v {
			return k
		}
	}
	return -1
}

// distinct answers "is v already a key in list" by a linear scan for short
// lists and through a set for long ones (a 64 KiB body holds thousands).
type distinct struct{ m map[string]struct{} }

const distinctLinear = 32

func seenIn[E any](s *distinct, list []E, key func(E) string, v string) bool {
	if s.m == nil && len(list) < distinctLinear {
		return indexOf(list, key, v) >= 0
	}
	if s.m == nil {
		s.m = make(map[string]struct{}, 2*len(list))
		for _, x := range list {
			s.m[key(x)] = struct{}{}
		}
	}
	if _, ok := s.m[v]; ok {
		return true
	}
	s.m[v] = struct{}{}
	return false
}

// ---- the members of §5.1 ----

// Bits of members seen in one object, for duplicate keys and required
// members.
const (
	mState uint16 = 1 << iota
	mBillingMode
	mBillingModesSupported
	mToolClass
	mRuntimeVersion
	mBillingEvidence
	mDetails
	mProjectReadiness
)

func (d *decoder) top(h *Heartbeat) *domain.Error {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return strictjson.Heartbeat.NotObject("", "")
	}
	d.i++
	var seen uint16
	first := true
	for {
		more, err := d.next(&first, '}')
		if err != nil {
			return err
		}
		if !more {
			break
		}
		k, err := d.key()
		if err != nil {
			return err
		}
		switch string(k) {
		case "state":
			if err := once(&seen, mState, "", "state"); err != nil {
				return err
			}
			if h.State, err = d.enum(StateOnline, StateDegraded); err != nil {
				return err.At("/state")
			}
		case "billing_mode":
			if err := once(&seen, mBillingMode, "", "billing_mode"); err != nil {
				return err
			}
			a := d.arena()
			if a.billingMode, err = d.formString(&codeForm); err != nil {
				return err.At("/billing_mode")
			}
			h.BillingMode = &a.billingMode
		case "billing_modes_supported":
			if err := once(&seen, mBillingModesSupported, "", "billing_modes_supported"); err != nil {
				return err
			}
			if h.BillingModesSupported, err = d.stringList("/billing_modes_supported", d.code); err != nil {
				return err
			}
		case "tool_class":
			if err := once(&seen, mToolClass, "", "tool_class"); err != nil {
				return err
			}
			a := d.arena()
			if a.toolClass, err = d.formString(&codeForm); err != nil {
				return err.At("/tool_class")
			}
			h.ToolClass = &a.toolClass
		case "runtime_version":
			if err := once(&seen, mRuntimeVersion, "", "runtime_version"); err != nil {
				return err
			}
			a := d.arena()
			if a.runtimeVersion, err = d.formString(&versionForm); err != nil {
				return err.At("/runtime_version")
			}
			h.RuntimeVersion = &a.runtimeVersion
		case "billing_evidence":
			if err := once(&seen, mBillingEvidence, "", "billing_evidence"); err != nil {
				return err
			}
			if err := d.evidence(); err != nil {
				return err
			}
			h.BillingEvidence = &d.a.evidence
		case "details":
			if err := once(&seen, mDetails, "", "details"); err != nil {
				return err
			}
			if err := d.details(&h.Details); err != nil {
				return err
			}
		case "project_readiness":
			if err := once(&seen, mProjectReadiness, "", "project_readiness"); err != nil {
				return err
			}
			if h.ProjectReadiness, err = d.readiness(); err != nil {
				return err
			}
			h.ProjectReadinessPresent = true
		default:
			return unknownMember("", k)
		}
	}
	d.ws()
	if d.i != len(d.b) {
		return d.syntax()
	}
	if seen&mState == 0 {
		return missing("/state", "state")
	}
	degraded := len(h.Details.DegradedReasons) > 0
	switch {
	case h.State == StateDegraded && !degraded:
		return invalid(`state "degraded" requires a non-empty details.degraded_reasons`).At("/state")
	case h.State == StateOnline && degraded:
		return invalid(`details.degraded_reasons is non-empty, so state must be "degraded"`).At("/state")
	}
	return nil
}

func (d *decoder) code() (string, *domain.Error) { return d.formString(&codeForm) }

func (d *decoder) evidence() *domain.Error {
	if err := d.want('{', "an object"); err != nil {
		return err.At("/billing_evidence")
	}
	d.i++
	ev := &d.arena().evidence
	const (
		mKeyType uint16 = 1 << iota
		mMethod
	)
	var seen uint16
	first := true
	for {
		more, err := d.next(&first, '}')
		if err != nil {
			return err
		}
		if !more {
			break
		}
		k, err := d.key()
		if err != nil {
			return err
		}
		switch string(k) {
		case "key_type":
			if err := once(&seen, mKeyType, "/billing_evidence", "key_type"); err != nil {
				return err
			}
			if ev.KeyType, err = d.code(); err != nil {
				return err.At("/billing_evidence/key_type")
			}
		case "method":
			if err := once(&seen, mMethod, "/billing_evidence", "method"); err != nil {
				return err
			}
			if ev.Method, err = d.code(); err != nil {
				return err.At("/billing_evidence/method")
			}
		default:
			return unknownMember("/billing_evidence", k)
		}
	}
	if seen&mKeyType == 0 {
		return missing("/billing_evidence/key_type", "key_type")
	}
	if seen&mMethod == 0 {
		return missing("/billing_evidence/method", "method")
	}
	return nil
}

func (d *decoder) details(det *Details) *domain.Error {
	if err := d.want('{', "an object"); err != nil {
		return err.At("/details")
	}
	d.i++
	const (
		mCapabilities uint16 = 1 << iota
		mActiveRuns
		mDegradedReasons
		mAdapter
		mRuntime
		mProtocolVersion
	)
	var seen uint16
	first := true
	for {
		more, err := d.next(&first, '}')
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		k, err := d.key()
		if err != nil {
			return err
		}
		switch string(k) {
		case "capabilities":
			if err := once(&seen, mCapabilities, "/details", "capabilities"); err != nil {
				return err
			}
			if err := d.capabilities(); err != nil {
				return err
			}
			det.Capabilities = &d.a.caps
		case "active_runs":
			if err := once(&seen, mActiveRuns, "/details", "active_runs"); err != nil {
				return err
			}
			if det.ActiveRuns, err = d.stringList("/details/active_runs", d.uuid); err != nil {
				return err
			}
		case "degraded_reasons":
			if err := once(&seen, mDegradedReasons, "/details", "degraded_reasons"); err != nil {
				return err
			}
			if det.DegradedReasons, err = d.stringList("/details/degraded_reasons", d.code); err != nil {
				return err
			}
		case "adapter":
			if err := once(&seen, mAdapter, "/details", "adapter"); err != nil {
				return err
			}
			if err := d.adapter(); err != nil {
				return err
			}
			det.Adapter = &d.a.adapter
		case "runtime":
			if err := once(&seen, mRuntime, "/details", "runtime"); err != nil {
				return err
			}
			if err := d.runtime(); err != nil {
				return err
			}
			det.Runtime = &d.a.runtime
		case "protocol_version":
			if err := once(&seen, mProtocolVersion, "/details", "protocol_version"); err != nil {
				return err
			}
			a := d.arena()
			if a.protocolVersion, err = d.positiveInt(); err != nil {
				return err.At("/details/protocol_version")
			}
			det.ProtocolVersion = &a.protocolVersion
		default:
			return unknownMember("/details", k)
		}
	}
}

func (d *decoder) capabilities() *domain.Error {
	const base = "/details/capabilities"
	if err := d.want('{', "an object"); err != nil {
		return err.At(base)
	}
	d.i++
	a := d.arena()
	c := &a.caps
	const (
		mFollowups uint16 = 1 << iota
		mComponents
		mVoiceInput
		mTitle
		mFilesOut
	)
	var seen uint16
	first := true
	for {
		more, err := d.next(&first, '}')
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		k, err := d.key()
		if err != nil {
			return err
		}
		var (
			bit  uint16
			name string
			slot *bool  // where the value is stored
			dst  **bool // the Capabilities field that points at it
		)
		switch string(k) {
		case "followups":
			if err := once(&seen, mFollowups, base, "followups"); err != nil {
				return err
			}
			if a.followups, err = d.enum(FollowupsSteer, FollowupsQueue); err != nil {
				return err.At(base + "/followups")
			}
			c.Followups = &a.followups
			continue
		case "components":
			bit, name, slot, dst = mComponents, "components", &a.bools[0], &c.Components
		case "voice_input":
			bit, name, slot, dst = mVoiceInput, "voice_input", &a.bools[1], &c.VoiceInput
		case "title":
			bit, name, slot, dst = mTitle, "title", &a.bools[2], &c.Title
		case "files_out":
			bit, name, slot, dst = mFilesOut, "files_out", &a.bools[3], &c.FilesOut
		default:
			return unknownMember(base, k)
		}
		if err := once(&seen, bit, base, name); err != nil {
			return err
		}
		if *slot, err = d.boolean(); err != nil {
			return err.At(base + "/" + name)
		}
		*dst = slot
	}
}

func (d *decoder) adapter() *domain.Error {
	const base = "/details/adapter"
	if err := d.want('{', "an object"); err != nil {
		return err.At(base)
	}
	d.i++
	a := d.arena()
	const (
		mName uint16 = 1 << iota
		mVersion
	)
	var seen uint16
	first := true
	for {
		more, err := d.next(&first, '}')
		if err != nil {
			return err
		}
		if !more {
			break
		}
		k, err := d.key()
		if err != nil {
			return err
		}
		switch string(k) {
		case "name":
			if err := once(&seen, mName, base, "name"); err != nil {
				return err
			}
			if a.adapter.Name, err = d.formString(&nameForm); err != nil {
				return err.At(base + "/name")
			}
		case "version":
			if err := once(&seen, mVersion, base, "version"); err != nil {
				return err
			}
			if a.adapterVersion, err = d.formString(&versionForm); err != nil {
				return err.At(base + "/version")
			}
			a.adapter.Version = &a.adapterVersion
		default:
			return unknownMember(base, k)
		}
	}
	if seen&mName == 0 {
		return missing(base+"/name", "name")
	}
	return nil
}

func (d *decoder) runtime() *domain.Error {
	const base = "/details/runtime"
	if err := d.want('{', "an object"); err != nil {
		return err.At(base)
	}
	d.i++
	a := d.arena()
	seen := false
	first := true
	for {
		more, err := d.next(&first, '}')
		if err != nil {
			return err
		}
		if !more {
			break
		}
		k, err := d.key()
		if err != nil {
			return err
		}
		if string(k) != "name" {
			return unknownMember(base, k)
		}
		if seen {
			return duplicateKey(base+"/name", "name")
		}
		seen = true
		if a.runtime.Name, err = d.formString(&nameForm); err != nil {
			return err.At(base + "/name")
		}
	}
	if !seen {
		return missing(base+"/name", "name")
	}
	return nil
}

func (d *decoder) readiness() ([]ReadinessEntry, *domain.Error) {
	const base = "/project_readiness"
	if err := d.want('[', "an array"); err != nil {
		return nil, err.At(base)
	}
	d.i++
	out := []ReadinessEntry{}
	var set distinct
	first := true
	for n := 0; ; n++ {
		more, err := d.next(&first, ']')
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		e, err := d.readinessEntry(n)
		if err != nil {
			return nil, err
		}
		if seenIn(&set, out, queueOf, e.Queue) {
			return nil, invalid("queue %q is listed twice (entries %d and %d)",
				e.Queue, indexOf(out, queueOf, e.Queue), n).At(base)
		}
		out = append(grow(out), e)
	}
}

func (d *decoder) readinessEntry(n int) (ReadinessEntry, *domain.Error) {
	ptr := func(member string) string { return elemPtr("/project_readiness", n) + member }
	var e ReadinessEntry
	if err := d.want('{', "an object"); err != nil {
		return e, err.At(ptr(""))
	}
	d.i++
	const (
		mQueue uint16 = 1 << iota
		mReady
		mReason
	)
	var seen uint16
	first := true
	for {
		more, err := d.next(&first, '}')
		if err != nil {
			return e, err
		}
		if !more {
			break
		}
		k, err := d.key()
		if err != nil {
			return e, err
		}
		var bit uint16
		switch string(k) {
		case "queue":
			bit = mQueue
		case "ready":
			bit = mReady
		case "reason":
			bit = mReason
		default:
			return e, unknownMember(ptr(""), k)
		}
		if seen&bit != 0 {
			return e, duplicateKey(ptr("/"+string(k)), string(k))
		}
		seen |= bit
		switch bit {
		case mQueue:
			e.Queue, err = d.formString(&nameForm)
		case mReady:
			e.Ready, err = d.boolean()
		case mReason:
			e.Reason, err = d.code()
		}
		if err != nil {
			return e, err.At(ptr("/" + string(k)))
		}
	}
	if seen&mQueue == 0 {
		return e, missing(ptr("/queue"), "queue")
	}
	if seen&mReady == 0 {
		return e, missing(ptr("/ready"), "ready")
	}
	return e, nil
}
