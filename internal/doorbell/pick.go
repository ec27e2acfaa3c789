package doorbell

import "sort"

// pickOrder orders sessions for delivery: streaming ones the client is
// known to read first, rotating among them by cursor so load spreads; then
// streaming ones that are bad (a ring on them went unanswered, or a write
// stalled); then streamless ones (their push is held by the transport
// until a stream opens, or dropped). bad may be nil.
func pickOrder(ss []SessionInfo, cursor int, bad func(SessionInfo) bool) []SessionInfo {
	rank := func(si SessionInfo) int {
		switch {
		case !si.Streaming:
			return 2
		case si.Stalled || (bad != nil && bad(si)):
			return 1
		}
		return 0
	}
	out := make([]SessionInfo, len(ss))
	copy(out, ss)
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank(out[i]), rank(out[j]); ri != rj {
			return ri < rj
		}
		return out[i].ID < out[j].ID
	})
	n := 0
	for n < len(out) && rank(out[n]) == 0 {
		n++
	}
	if n > 1 {
		k := cursor % n
		rot := append(append([]SessionInfo{}, out[k:n]...), out[:k]...)
		copy(out, rot)
	}
	return out
}
