package mcpserver

// ExpiryScanEvery exposes the expiry scan period to the tests.
var ExpiryScanEvery = expiryScanEvery

// PingScan runs one ping scan now (the ping loop runs it every tick of
// Options.Clock; at one clock reading a second scan changes nothing).
func (s *Server) PingScan() { s.pingScan() }

// MaxOutbox is the bound of a session's notifications not yet written.
const MaxOutbox = maxOutbox
