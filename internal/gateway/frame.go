package gateway

// The hot path of the gateway parses the envelope {"op", "d"} and the
// heartbeat's d {"agent"} with a small scanner instead of the strict-JSON
// layer: measured (BenchmarkFrame), the scanner takes a heartbeat frame
// with 1 allocation where the strict path (strictjson.Object, which reads
// and checks every byte of agent before liveness.DecodeHeartbeat reads it
// again) takes 30 and 7 times as long (docs/benchmarks.md, One strict-JSON
// layer). The scanner checks the envelope's structure itself
// and only captures the member agent, which liveness.DecodeHeartbeat then
// checks completely; any frame it does not handle (escapes in keys or op,
// other members, other shapes) goes to the strict path, which produces the
// error frames. FuzzFastFrame holds the scanner to the strict path.

// scanObject walks one JSON object in b, calling member with each key and
// the raw bytes of its value. It returns false when b is not a single
// object it can walk (keys with escapes included), or when member does.
func scanObject(b []byte, member func(key, value []byte) bool) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		end := i + 1
		for end < len(b) && b[end] != '"' && b[end] != '\\' && b[end] >= 0x20 {
			end++
		}
		if end >= len(b) || b[end] != '"' {
			return false
		}
		key := b[i+1 : end]
		i = skipWS(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		start := i
		if i = skipValue(b, i); i < 0 {
			return false
		}
		if !member(key, b[start:i]) {
			return false
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return skipWS(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index after the JSON value starting at i, or -1.
// Containers are matched by depth with strings skipped; their contents are
// not checked (the captured value is checked by its own decoder).
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // a number or a literal
		start := i
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
}

func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// fastFrame parses {"op": "<op>", "d": <value>} (d optional, no other
// members, op a plain string). ok is false when the frame needs the strict
// path.
func fastFrame(b []byte) (op string, d []byte, ok bool) {
	seenOp, seenD := false, false
	ok = scanObject(b, func(key, v []byte) bool {
		switch {
		case string(key) == "op" && !seenOp:
			if len(v) < 2 || v[0] != '"' {
				return false
			}
			for _, c := range v[1 : len(v)-1] {
				if c == '\\' || c < 0x20 {
					return false
				}
			}
			op, seenOp = string(v[1:len(v)-1]), true
			return true
		case string(key) == "d" && !seenD:
			d, seenD = v, true
			return true
		}
		return false
	})
	return op, d, ok && seenOp
}

// fastHeartbeatData parses the heartbeat's d: {} or {"agent": <object>}.
func fastHeartbeatData(d []byte) (agent []byte, ok bool) {
	seen := false
	ok = scanObject(d, func(key, v []byte) bool {
		if string(key) != "agent" || seen || len(v) == 0 || v[0] != '{' {
			return false
		}
		agent, seen = v, true
		return true
	})
	return agent, ok
}
